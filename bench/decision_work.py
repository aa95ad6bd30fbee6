"""Benchmark: the platform's CPU for a decision's own work, the form before and now, in one
process, alternated (so the machine's load weighs on both alike).

On a throwaway PostgreSQL (migrated, one org, one expert):

- the decision's database work: a request's session that reads the caller
  (`UserRepository.principal_of`), then the org's policy and active flag
  (`OrgRepository.policy_if_active`), then appends the decision's audit row
  (`floor.audit.service.record`). Before: one transaction around them (BEGIN before the
  first statement, COMMIT after the last), each statement through SQLAlchemy's session.
  Now: the decision routes' session (`tasks.autocommit.autocommitting`), each statement
  its own transaction, the policy read and the append sent to the driver directly;
- the caller and the org's policy: before, the caller's statement, then the org's policy
  and active flag (`OrgRepository.policy_if_active`), each sent to the driver; now one
  statement for both (`UserRepository.principal_in`, the decision routes' form);
- the answer's task: the read model of the task as the status write left it, from the API
  server's answer parsed whole (`AgenticTask.from_wire`, before) or from the judged task
  with the answer's metadata and status (`tasks.decisions._as_written`, now).

The figure is this process's CPU per decision (`time.process_time`: the client's share,
what the platform pays; PostgreSQL's own work is another process's), the best of ROUNDS.
Run by hand; it prints and asserts nothing.

    .venv/bin/python bench/decision_work.py [--calls 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from humanwork_core import taskflow
from humanwork_core.policy import STRICT
from humanwork_core.resources import AgenticTask, Verdict
from humanwork_dev.postgres import PostgresServer
from platform_api.db import make_engine, make_sessionmaker, migrate
from platform_api.floor.accounts import UserRepository
from platform_api.floor.audit.service import record
from platform_api.models import Membership, Org, User
from platform_api.orgs.repository import OrgRepository, stored_policy
from platform_api.tasks.autocommit import autocommitting
from platform_api.tasks.decisions import _as_written
from platform_api.tasks.service import read_model

ORG_ID = uuid.uuid4()
Sessions = async_sessionmaker[AsyncSession]


async def _statements(session: AsyncSession, n: int) -> None:
    await UserRepository(session).principal_of(username="expert")
    await OrgRepository(session).policy_if_active(ORG_ID)
    details = {"verdict": "approve", "idempotency_key": f"k{n}", "step_id": "read"}
    await record(
        session,
        actor="expert",
        action="task.step.approve",
        target=f"agentictask:org-bench/task-{n}",
        org_id=ORG_ID,
        details=details,
    )


async def _caller_then_policy(sessions: Sessions, _: int) -> None:
    async with sessions() as session:
        await autocommitting(session)
        await UserRepository(session).principal_of(username="expert")
        await OrgRepository(session).policy_if_active(ORG_ID)
        await session.commit()


async def _caller_with_policy(sessions: Sessions, _: int) -> None:
    async with sessions() as session:
        await autocommitting(session)
        found = await UserRepository(session).principal_in("org-bench", username="expert")
        if found is None or found[2] is None:
            raise RuntimeError("the bench's expert is no member of its org")
        stored_policy(found[2].policy)
        await session.commit()


async def _in_a_transaction(sessions: Sessions, n: int) -> None:
    async with sessions() as session, session.begin():
        await _statements(session, n)


async def _autocommitting(sessions: Sessions, n: int) -> None:
    async with sessions() as session:
        await autocommitting(session)
        await _statements(session, n)
        await session.commit()  # what `deciding` does: no round trip here


def _task_and_answer() -> tuple[AgenticTask, dict[str, Any]]:
    step = {
        "id": "read",
        "description": "Fetch October orders",
        "kind": "action",
        "tool": "amazon",
        "parameters": {"action": "listOrders", "params": {"CreatedAfter": "2026-10-01"}},
        "risk": "low",
    }
    wire: dict[str, Any] = {
        "apiVersion": "humanwork.io/v1alpha1",
        "kind": "AgenticTask",
        "metadata": {
            "name": "task-abc",
            "namespace": "org-bench",
            "uid": str(uuid.uuid4()),
            "resourceVersion": "100",
            "generation": 1,
            "creationTimestamp": "2026-12-02T10:00:00Z",
            "managedFields": [{"manager": "humanwork-platform-api", "operation": "Apply"}],
        },
        "spec": {
            "orgId": str(ORG_ID),
            "agentRef": {"name": "shop"},
            "description": "Reconcile October",
            "requestedBy": "requester",
            "steps": [step],
        },
    }
    task = AgenticTask.from_wire(wire)
    now = datetime.now(UTC)
    request = taskflow.DecisionRequest(
        verdict=Verdict.APPROVE,
        by="expert",
        step_hash=taskflow.step_hash(task.spec.steps[0]),
        idempotency_key="k",
    )
    after = taskflow.decide(task, "read", request, now, org=STRICT)
    written = {**wire, "status": after.to_wire()}
    written["metadata"] = {**wire["metadata"], "resourceVersion": "101"}
    return task, written


TASK, WRITTEN = _task_and_answer()


async def _parsed_whole(_: Sessions, __: int) -> None:
    read_model(AgenticTask.from_wire(WRITTEN), datetime.now(UTC))


async def _as_judged(_: Sessions, __: int) -> None:
    read_model(_as_written(TASK, WRITTEN), datetime.now(UTC))


Call = Callable[[Sessions, int], Awaitable[None]]
PAIRS: list[tuple[str, Call, Call]] = [
    ("the statements, BEGIN / COMMIT (before)", _in_a_transaction, _autocommitting),
    ("the answer's task read model", _parsed_whole, _as_judged),
    ("the caller, then the org's policy (before)", _caller_then_policy, _caller_with_policy),
]


async def _cpu_per_call(sessions: Sessions, call: Call, calls: int, offset: int) -> float:
    start = time.process_time()
    for n in range(calls):
        await call(sessions, offset + n)
    return (time.process_time() - start) / calls * 1e6


async def _run(url: str, calls: int, rounds: int) -> None:
    engine = make_engine(url)
    await migrate(engine)
    sessions = make_sessionmaker(engine)
    async with sessions() as session, session.begin():
        session.add(Org(id=ORG_ID, slug="bench", name="Bench", namespace="org-bench"))
        user = User(username="expert", role="expert")
        session.add(user)
        await session.flush()
        session.add(Membership(user_id=user.id, org_id=ORG_ID, role="expert"))
    assert _as_written(TASK, WRITTEN) == AgenticTask.from_wire(WRITTEN)
    print(f"CPU per decision in this process, µs (best of {rounds} rounds of {calls}):")
    print(f"  {'work':44} {'before':>8} {'now':>8} {'saved':>8}")
    for name, before, now in PAIRS:
        best = [float("inf"), float("inf")]
        for round_ in range(rounds):
            for i, call in enumerate((before, now)):
                spent = await _cpu_per_call(sessions, call, calls, (round_ * 2 + i) * calls)
                best[i] = min(best[i], spent)
        print(f"  {name:44} {best[0]:8.0f} {best[1]:8.0f} {best[0] - best[1]:8.0f}")
    await engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}")
    with PostgresServer() as postgres:
        url = asyncio.run(postgres.create_database("decisions"))
        asyncio.run(_run(url, args.calls, args.rounds))
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
