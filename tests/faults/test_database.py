"""PostgreSQL restarted while three experts approve a dozen writes, and while the agent's
write is in flight (applied upstream, its answer held in the tests' fault proxy: the claim
is open in the database). The restart is an immediate shutdown (`pg_ctl -m immediate`, as
a crash or a failover: every connection cut, recovery from the WAL), on the session's own
PostgreSQL. Each test ends with the invariant checker and prints the time to recover; no
step may end `Failed` for it (a database that blinked says nothing about a step)."""

from __future__ import annotations

import time

from humanwork_dev.postgres import PostgresServer
from tests.faults.conftest import SETTLE_WITHIN, STARTUP, FaultWorld
from tests.faults.test_upstream import WRITE_PATH, execution, keys_of, resolve, side_effects
from tests.faults.test_upstream import wait_states as settled_states
from tests.support import eventually

TASKS = 12


def restart(postgres: PostgresServer) -> None:
    """Crash and restart the server on its port, data and options (`postmaster.opts`)."""
    postgres._run(
        str(postgres.bin_dir / "pg_ctl"),
        "-D",
        str(postgres.data_dir),
        "-l",
        str(postgres.log_file),
        "-m",
        "immediate",
        "-w",
        "-t",
        "90",
        "restart",
        timeout=120,
    )


def test_postgres_restarted_mid_approvals_loses_nothing(
    fresh: FaultWorld, postgres: PostgresServer
) -> None:
    world = fresh
    names = world.create_tasks(TASKS)
    experts = world.approvals_in_flight(names, answered=3)
    fault_at = time.monotonic()
    restart(postgres)
    experts.join(STARTUP + SETTLE_WITHIN)
    assert {a.task for a in world.answered} >= set(names)
    world.check(fault_at, "PostgreSQL restarted mid-approvals")
    states = settled_states(world, names)
    assert "Failed" not in states.values(), states


def test_postgres_restarted_mid_execution_runs_each_step_once(
    fresh: FaultWorld, postgres: PostgresServer
) -> None:
    world = fresh
    names = world.create_tasks(3)
    held = world.proxy.inject("hold", path_contains=WRITE_PATH, where="after")
    world.approve_all(names)
    assert held.reached.wait(120)  # a write applied upstream, its claim open in the database
    fault_at = time.monotonic()
    restart(postgres)
    held.released.set()
    states = settled_states(world, names, within=SETTLE_WITHIN)
    assert "Failed" not in states.values(), states
    world.check(fault_at, "PostgreSQL restarted mid-execution")
    keys = keys_of(world, names)
    unknown = [n for n, state in states.items() if state == "OutcomeUnknown"]
    effects = {n: side_effects(world, keys[n]) for n in unknown}
    # an unknown outcome is the expert's: the held write happened; a claim the restart cut
    # before its request left did not, and is never retried blind (at most once each)
    assert all(count <= 1 for count in effects.values()), (states, effects)
    for name in unknown:  # the expert checks the shop, and says what happened
        resolve(world, name, "applied" if effects[name] else "not_applied")
    world.check(fault_at, "PostgreSQL restarted mid-execution, resolved")
    eventually(lambda: all(execution(world, n) == "Succeeded" for n in names), SETTLE_WITHIN)
    assert all(side_effects(world, keys[n]) == 1 for n in names)
