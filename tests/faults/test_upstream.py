"""The upstream misbehaves between the platform's tool proxy and the fake Shopify (through
the tests' own fault proxy on loopback) while three experts approve a dozen writes and the
agent executes them: the connection reset after the request was sent, a burst of 5xx, 429
with Retry-After, answers slower than the timeout. One fault per test; each ends with the
invariant checker, after the experts resolved what only a human can."""

from __future__ import annotations

import time

import httpx

from tests.faults.conftest import UPSTREAM_TIMEOUT, FaultWorld

WRITE_PATH = "inventory_levels/adjust.json"
TASKS = 12


def execution(world: FaultWorld, name: str) -> str | None:
    steps = (world.task(name).get("status") or {}).get("steps") or []
    return next(((s.get("execution") or {}).get("state") for s in steps if s["id"] == "fix"), None)


def wait_states(world: FaultWorld, names: list[str], within: float = 90) -> dict[str, str | None]:
    """Each task's execution state once none is running any more."""
    deadline = time.monotonic() + within
    while True:
        states = {name: execution(world, name) for name in names}
        if all(state in ("Succeeded", "OutcomeUnknown", "Failed") for state in states.values()):
            return states
        assert time.monotonic() < deadline, states
        time.sleep(0.25)


def resolve(world: FaultWorld, name: str, outcome: str) -> None:
    r = httpx.post(
        f"{world.url}/human-tasks/{world.namespace}/{name}/fix/resolve",
        json={"outcome": outcome, "note": "checked the Shopify admin"},
        headers=world.experts[1],
        timeout=30,
    )
    assert r.status_code == 200, r.text


def keys_of(world: FaultWorld, names: list[str]) -> dict[str, str]:
    return {name: f"step:{world.task(name)['uid']}/fix" for name in names}


def side_effects(world: FaultWorld, key: str) -> int:
    return sum(1 for s in world.shop.side_effects if s.idempotency_key == key)


def test_a_connection_reset_after_the_request_was_sent_is_never_retried_blind(
    fresh: FaultWorld,
) -> None:
    world = fresh
    names = world.create_tasks(TASKS)
    world.proxy.inject("reset", path_contains=WRITE_PATH, times=3)
    fault_at = time.monotonic()
    world.approve_all(names)
    states = wait_states(world, names)
    unknown = [n for n, s in states.items() if s == "OutcomeUnknown"]
    assert len(unknown) == 3, states
    assert sum(p.done == "reset" for p in world.proxy.log) == 3
    keys = keys_of(world, names)
    for name in unknown:  # applied upstream, answered by a reset: once, never again
        assert side_effects(world, keys[name]) == 1
    world.check(fault_at, "connection reset after the request was sent")
    for name in unknown:
        resolve(world, name, "applied")
    world.check(fault_at, "connection reset, resolved as applied")
    assert all(execution(world, n) == "Succeeded" for n in names)


def test_a_burst_of_5xx_leaves_writes_for_an_expert_and_each_runs_once(fresh: FaultWorld) -> None:
    world = fresh
    names = world.create_tasks(TASKS)
    world.proxy.inject("status", path_contains=WRITE_PATH, times=4, status=503)
    fault_at = time.monotonic()
    world.approve_all(names)
    states = wait_states(world, names)
    unknown = [n for n, s in states.items() if s == "OutcomeUnknown"]
    assert len(unknown) == 4, states
    keys = keys_of(world, names)
    assert all(side_effects(world, keys[n]) == 0 for n in unknown)  # the 503s never reached it
    world.check(fault_at, "a burst of 503")
    for name in unknown:
        resolve(world, name, "not_applied")
    world.check(fault_at, "a burst of 503, resolved as not applied")
    assert all(execution(world, n) == "Succeeded" for n in names)
    assert all(side_effects(world, keys[n]) == 1 for n in names)


def test_429_with_retry_after_is_waited_out_and_each_write_runs_once(fresh: FaultWorld) -> None:
    world = fresh
    names = world.create_tasks(TASKS)
    seen = len(world.proxy.log)
    world.proxy.inject("status", path_contains=WRITE_PATH, times=5, status=429, retry_after=1)
    fault_at = time.monotonic()
    world.approve_all(names)
    world.check(fault_at, "429 with Retry-After")
    keys = keys_of(world, names)
    assert all(execution(world, n) == "Succeeded" for n in names)
    assert all(side_effects(world, keys[n]) == 1 for n in names)
    assert sum(p.done == "status" for p in world.proxy.log[seen:]) == 5


def test_answers_slower_than_the_timeout_become_outcome_unknown(fresh: FaultWorld) -> None:
    world = fresh
    names = world.create_tasks(TASKS)
    world.proxy.inject("slow", path_contains=WRITE_PATH, times=2, seconds=UPSTREAM_TIMEOUT + 2)
    fault_at = time.monotonic()
    world.approve_all(names)
    states = wait_states(world, names)
    unknown = [n for n, s in states.items() if s == "OutcomeUnknown"]
    assert len(unknown) == 2, states
    keys = keys_of(world, names)
    assert all(side_effects(world, keys[n]) == 1 for n in unknown)
    world.check(fault_at, "answers slower than the timeout")
    for name in unknown:
        resolve(world, name, "applied")
    world.check(fault_at, "slow answers, resolved as applied")
