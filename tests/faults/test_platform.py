"""The platform API killed (SIGKILL) while three experts approve a dozen writes and the agent
executes them: at the named points of a decision (before its status write, after it), at
whatever moment the approvals are in flight, and mid tool call (the write held in the
tests' fault proxy before it reached the upstream, or after the upstream applied it and
answered). The experts' clients retry every approval not answered with its
Idempotency-Key, as a browser or the kubectl plugin does; the platform restarts on its
port. Each test ends with the invariant checker and prints the time to recover."""

from __future__ import annotations

import time

import pytest

from tests.faults.conftest import SETTLE_WITHIN, STARTUP, FaultWorld
from tests.faults.test_upstream import WRITE_PATH, execution, keys_of, resolve, side_effects
from tests.faults.test_upstream import wait_states as settled_states

TASKS = 12


def wait_dead(world: FaultWorld, within: float = 90) -> None:
    assert world.platform.proc is not None
    world.platform.proc.wait(within)


@pytest.mark.parametrize("point", ["decision.before_status_write", "decision.after_status_write"])
def test_the_platform_killed_at_a_decision_s_status_write_loses_nothing(
    fresh: FaultWorld, point: str
) -> None:
    world = fresh
    names = world.create_tasks(TASKS)
    world.restart_platform(env={"HUMANWORK_TEST_FAULT_POINT": point})
    experts = world.approvals_in_flight(names)
    wait_dead(world)  # the first decision to get there killed it: the point was reached
    fault_at = time.monotonic()
    assert world.platform.proc is not None and world.platform.proc.returncode == -9
    world.restart_platform()
    experts.join(STARTUP + SETTLE_WITHIN)
    assert {a.task for a in world.answered} >= set(names)
    world.check(fault_at, f"platform killed at {point}")


def test_the_platform_killed_while_approvals_are_in_flight_loses_nothing(
    fresh: FaultWorld,
) -> None:
    world = fresh
    names = world.create_tasks(TASKS)
    experts = world.approvals_in_flight(names, answered=3)
    world.platform.kill()
    fault_at = time.monotonic()
    world.restart_platform()
    experts.join(STARTUP + SETTLE_WITHIN)
    assert {a.task for a in world.answered} >= set(names)
    world.check(fault_at, "platform killed with approvals in flight")


@pytest.mark.parametrize("where", ["before", "after"])
def test_the_platform_killed_mid_tool_call_leaves_the_step_to_an_expert(
    fresh: FaultWorld, where: str
) -> None:
    """Its claim stays `started`; once the lease ran out it is an unknown outcome in the
    queue (never failed, never sent again); the expert's answer ends it with exactly one
    side effect."""
    world = fresh
    names = world.create_tasks(3)
    held = world.proxy.inject("hold", path_contains=WRITE_PATH, where=where, drop=True)
    world.approve_all(names)
    assert held.reached.wait(120)  # a write in the proxy's hands: the point was reached
    world.platform.kill()
    fault_at = time.monotonic()
    held.released.set()  # `before`: dropped, never sent; `after`: the answer to nobody
    world.restart_platform()
    states = settled_states(world, names, within=SETTLE_WITHIN)
    assert "Failed" not in states.values(), states
    unknown = [n for n, s in states.items() if s == "OutcomeUnknown"]
    keys = keys_of(world, names)
    applied = where == "after"
    # The held write is one unknown outcome. Another write the platform had sent when it
    # was killed is unknown too (the kill can land between its claim and its answer): each
    # is the expert's, with at most one side effect, and none was sent again.
    effects = {n: side_effects(world, keys[n]) for n in unknown}
    assert unknown and all(count <= 1 for count in effects.values()), (states, effects)
    assert (1 if applied else 0) in effects.values(), (states, effects)
    world.check(fault_at, f"platform killed mid tool call, {where} the upstream answered")
    for name in unknown:  # the expert checks the shop, and says what happened
        resolve(world, name, "applied" if effects[name] else "not_applied")
    world.check(fault_at, f"platform killed mid tool call ({where}), resolved")
    assert all(execution(world, n) == "Succeeded" for n in names)
    assert all(side_effects(world, keys[n]) == 1 for n in names)
