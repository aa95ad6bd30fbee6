"""The platform API killed (SIGKILL) while three experts approve a dozen writes and the agent
executes them: at the named points of a decision (before its status write, after it), and
at whatever moment the approvals are in flight. The experts' clients retry every approval
not answered with its Idempotency-Key, as a browser or the kubectl plugin does; the
platform restarts on its port. Each test ends with the invariant checker."""

from __future__ import annotations

import threading
import time

import pytest

from tests.faults.conftest import SETTLE_WITHIN, FaultWorld

TASKS = 12


def wait_dead(world: FaultWorld, within: float = 60) -> None:
    assert world.platform.proc is not None
    world.platform.proc.wait(within)


@pytest.mark.parametrize("point", ["decision.before_status_write", "decision.after_status_write"])
def test_the_platform_killed_at_a_decision_s_status_write_loses_nothing(
    fresh: FaultWorld, point: str
) -> None:
    world = fresh
    names = world.create_tasks(TASKS)
    world.restart_platform(env={"HUMANWORK_TEST_FAULT_POINT": point})
    experts = threading.Thread(target=world.approve_all, args=(names,))
    experts.start()
    wait_dead(world)  # the first decision to get there killed it
    fault_at = time.monotonic()
    assert world.platform.proc is not None and world.platform.proc.returncode == -9
    world.restart_platform()
    experts.join(SETTLE_WITHIN)
    assert {a.task for a in world.answered} >= set(names)
    world.check(fault_at, f"platform killed at {point}")


def test_the_platform_killed_while_approvals_are_in_flight_loses_nothing(
    fresh: FaultWorld,
) -> None:
    world = fresh
    names = world.create_tasks(TASKS)
    before = len(world.answered)
    experts = threading.Thread(target=world.approve_all, args=(names,))
    experts.start()
    deadline = time.monotonic() + 60
    while len(world.answered) < before + 3:  # some answered, the rest in flight
        assert time.monotonic() < deadline
        time.sleep(0.05)
    world.platform.kill()
    fault_at = time.monotonic()
    world.restart_platform()
    experts.join(SETTLE_WITHIN)
    assert {a.task for a in world.answered} >= set(names)
    world.check(fault_at, "platform killed with approvals in flight")
