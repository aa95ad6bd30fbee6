"""Benchmark: the platform's CPU per call of the queries on an approval's hot path.

On a throwaway PostgreSQL (migrated, one org, one expert), each query runs N times in
this process in two forms, in alternation (ROUNDS rounds, the best of each printed):
the ORM statement built for each call (what the platform ran before) and the platform's
own repository method (a Core statement built once, its values bound at execution). The
figure is this process's CPU per call (`time.process_time`: the client's share of the
query, which is what the platform pays; PostgreSQL's own work is another process's):

- the caller: the user and its memberships with their roles' capabilities
  (`UserRepository.principal_of`, every authenticated request);
- the org read of a decision: its approval policy and active flag
  (`OrgRepository.policy_if_active`);
- the event log's insert (`EventRepository.add`, every event the notifier records).

Run by hand; it prints and asserts nothing.

    .venv/bin/python bench/hot_queries.py [--calls 2000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from sqlalchemy import String, cast, func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from humanwork_dev.postgres import PostgresServer
from platform_api.db import make_engine, make_sessionmaker, migrate
from platform_api.floor.accounts import CAPABILITY, FIELD, SEPARATOR, UserRepository
from platform_api.models import AccessGrant, Membership, NotifyEvent, Org, User
from platform_api.notify.repository import EventRepository
from platform_api.orgs.repository import OrgRepository

Call = Callable[[AsyncSession, int], Awaitable[object]]


async def _caller_orm(session: AsyncSession, _: int) -> object:
    """The caller's query as the ORM statement built per request (the form before)."""
    capabilities = (
        select(func.aggregate_strings(AccessGrant.capability, CAPABILITY))
        .where(AccessGrant.role == Membership.role)
        .scalar_subquery()
    )
    line = cast(Membership.org_id, String) + FIELD + Membership.role + FIELD
    line = line + func.coalesce(capabilities, "")
    grants = (
        select(func.aggregate_strings(line, SEPARATOR))
        .where(Membership.user_id == User.id)
        .scalar_subquery()
    )
    query = select(User, grants).where(User.username == "expert")
    return (await session.execute(query)).first()


async def _org_orm(session: AsyncSession, _: int) -> object:
    query = select(Org.approval_policy, Org.deactivated_at).where(Org.id == ORG_ID)
    return (await session.execute(query)).first()


async def _event_orm(session: AsyncSession, n: int) -> object:
    statement = (
        pg_insert(NotifyEvent)
        .values(org_id=ORG_ID, event_id=f"orm-{n}", event="e", payload={"n": n}, created_at=NOW)
        .on_conflict_do_nothing(index_elements=["org_id", "event_id"])
        .returning(NotifyEvent.seq)
    )
    return (await session.execute(statement)).scalar_one_or_none()


async def _caller(session: AsyncSession, _: int) -> object:
    return await UserRepository(session).principal_of(username="expert")


async def _org(session: AsyncSession, _: int) -> object:
    return await OrgRepository(session).policy_if_active(ORG_ID)


async def _event(session: AsyncSession, n: int) -> object:
    return await EventRepository(session).add(ORG_ID, f"core-{n}", "e", {"n": n}, NOW)


ORG_ID = uuid.uuid4()
NOW = datetime.now(UTC)
PAIRS: list[tuple[str, Call, Call]] = [
    ("the caller (principal_of)", _caller_orm, _caller),
    ("a decision's org read (policy_if_active)", _org_orm, _org),
    ("the event log's insert (EventRepository.add)", _event_orm, _event),
]


async def _cpu_per_call(session: AsyncSession, call: Call, calls: int, offset: int) -> float:
    start = time.process_time()
    for n in range(calls):
        await call(session, offset + n)
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
    print(f"CPU per call in this process, µs (best of {rounds} rounds of {calls}, alternated):")
    print(f"  {'query':48} {'before (ORM)':>12} {'now':>8} {'saved':>8}")
    for name, before, now in PAIRS:
        best = [float("inf"), float("inf")]
        for round_ in range(rounds):
            for i, call in enumerate((before, now)):
                async with sessions() as session, session.begin():
                    spent = await _cpu_per_call(session, call, calls, (round_ * 2 + i) * calls)
                best[i] = min(best[i], spent)
        print(f"  {name:48} {best[0]:12.0f} {best[1]:8.0f} {best[0] - best[1]:8.0f}")
    await engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}")
    with PostgresServer() as postgres:
        url = asyncio.run(postgres.create_database("hot"))
        asyncio.run(_run(url, args.calls, args.rounds))


if __name__ == "__main__":
    main()
