"""Two platform replicas on one database, the experts' clients spread over both (as behind
a load balancer: a request that fails goes to the next replica), one replica killed at a
decision's status write with a dozen approvals in flight. The other carries on alone; the
test ends with the invariant checker and prints the time to recover."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from humanwork_dev.processes import PlatformProcess
from tests.faults.conftest import SETTLE_WITHIN, STARTUP, FaultWorld

TASKS = 12


@pytest.fixture
def second(fresh: FaultWorld) -> Iterator[PlatformProcess]:
    """A second replica of the world's platform (same settings and database), armed to kill
    itself after its first decision's status write."""
    first = fresh.platform
    replica = PlatformProcess(
        fresh.cluster.kubeconfig,
        fresh.cluster.kubectl_path,
        first.workdir.parent / "replica-b",
        env=first.env,
    )
    replica.start(STARTUP, env={"HUMANWORK_TEST_FAULT_POINT": "decision.after_status_write"})
    fresh.replicas = [first.url, replica.url]
    yield replica
    fresh.replicas = []
    replica.stop()
    print(replica.tail(30))


def test_two_replicas_one_killed_at_a_decision_the_other_loses_nothing(
    fresh: FaultWorld, second: PlatformProcess
) -> None:
    world = fresh
    names = world.create_tasks(TASKS)
    experts = world.approvals_in_flight(names)
    assert second.proc is not None
    second.proc.wait(90)  # its first decision got there: the point was reached
    fault_at = time.monotonic()
    assert second.proc.returncode == -9
    experts.join(STARTUP + SETTLE_WITHIN)
    assert {a.task for a in world.answered} >= set(names)
    world.check(fault_at, "one of two replicas killed at a decision's status write")
