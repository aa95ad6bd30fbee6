"""kube-apiserver and etcd restarted (SIGKILL, then started again with the same command
line, port and data: `humanwork_dev.cluster_restart`) while three experts approve a dozen
writes, and the API server while the agent's write is in flight (applied upstream, its
answer released to the platform while the API server is down, so the agent's status write
meets the outage). Every component's watch breaks; a decision that could not be written
answers 5xx and is retried with its Idempotency-Key. Each test ends with the invariant
checker and prints the time to recover; no step may end `Failed` for it."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from humanwork_dev import cluster_restart
from tests.faults.conftest import SETTLE_WITHIN, STARTUP, FaultWorld
from tests.faults.test_upstream import WRITE_PATH, execution, keys_of, resolve, side_effects
from tests.faults.test_upstream import wait_states as settled_states

TASKS = 12


def restart(
    world: FaultWorld, component: str, while_down: Callable[[], None] | None = None
) -> float:
    """Crash `component` of the session's local control plane and start it again; the
    seconds until it answered."""
    info = world.cluster.info
    assert info is not None, "the fault tests restart the local control plane's parts"
    took = cluster_restart.restart(Path(info.state_dir), component, while_down=while_down)
    print(f"\n[faults] {component} answering again {took:.1f} s after it was killed")
    return took


@pytest.mark.parametrize("component", ["kube-apiserver", "etcd"])
def test_the_control_plane_restarted_mid_approvals_loses_nothing(
    fresh: FaultWorld, component: str
) -> None:
    world = fresh
    names = world.create_tasks(TASKS)
    experts = world.approvals_in_flight(names, answered=3)
    fault_at = time.monotonic()
    restart(world, component)
    experts.join(STARTUP + SETTLE_WITHIN)
    assert {a.task for a in world.answered} >= set(names)
    world.check(fault_at, f"{component} restarted mid-approvals")
    states = settled_states(world, names)
    assert "Failed" not in states.values(), states


def test_the_apiserver_restarted_mid_execution_runs_each_step_once(fresh: FaultWorld) -> None:
    world = fresh
    names = world.create_tasks(3)
    held = world.proxy.inject("hold", path_contains=WRITE_PATH, where="after")
    world.approve_all(names)
    assert held.reached.wait(120)  # a write applied upstream, its answer held
    fault_at = time.monotonic()
    restart(world, "kube-apiserver", while_down=held.released.set)
    states = settled_states(world, names, within=SETTLE_WITHIN)
    assert "Failed" not in states.values(), states
    world.check(fault_at, "kube-apiserver restarted mid-execution")
    keys = keys_of(world, names)
    for name, state in states.items():  # an unknown outcome is the expert's: it did happen
        if state == "OutcomeUnknown":
            assert side_effects(world, keys[name]) == 1
            resolve(world, name, "applied")
    world.check(fault_at, "kube-apiserver restarted mid-execution, resolved")
    assert all(execution(world, n) == "Succeeded" for n in names)
    assert all(side_effects(world, keys[n]) == 1 for n in names)
