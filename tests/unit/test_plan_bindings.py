"""Who counts as a task's requester once plan requests are bound before the agent is asked
(`agents.bindings`, `tasks.requester`), on the embedded database (SQLite in memory): the
binding a task's request id names wins over whatever the task says, an unfinished binding
counts for the agent's unvouched tasks only, and a retry keeps the first binding."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine

from humanwork_core.requester import PLAN_REQUEST_ANNOTATION, REQUESTER_ANNOTATION
from humanwork_core.resources import AgenticTask
from platform_api.agents.bindings import bind_before_asking, mark_bound
from platform_api.models import Base, PlanBinding
from platform_api.tasks.requester import bound_requester, is_requester
from tests.unit.factories import make_task

ORG = uuid.uuid4()
AGENT = "acme-ecommerce"


@pytest.fixture
async def sessions() -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    engine = create_async_engine("sqlite+aiosqlite://")
    async with engine.begin() as conn:
        await conn.run_sync(Base.metadata.create_all)
    yield async_sessionmaker(engine, expire_on_commit=False)
    await engine.dispose()


def agent_task(created: datetime | None = None, **annotations: str) -> AgenticTask:
    task = make_task()
    spec = task.spec.model_copy(
        update={
            "requested_by": f"agent:{AGENT}",
            "agent_ref": task.spec.agent_ref.model_copy(update={"name": AGENT}),
        }
    )
    meta = task.metadata.model_copy(
        update={
            "annotations": dict(annotations),
            "creation_timestamp": created or datetime.now(UTC),
        }
    )
    return task.model_copy(update={"spec": spec, "metadata": meta})


async def requester(
    sessions: async_sessionmaker[AsyncSession], task: AgenticTask, who: str
) -> bool:
    async with sessions() as session:
        return await is_requester(session, ORG, task, who)


async def test_the_binding_a_task_names_wins_over_what_the_task_says(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    await bind_before_asking(sessions, ORG, AGENT, "alice", "r1")
    async with sessions() as session, session.begin():
        await mark_bound(session, "r1", "t-1")
    unvouched = agent_task(**{PLAN_REQUEST_ANNOTATION: "r1"})
    someone_else = agent_task(**{PLAN_REQUEST_ANNOTATION: "r1", REQUESTER_ANNOTATION: "bob"})
    for task in (unvouched, someone_else):
        assert await requester(sessions, task, "alice")
        assert not await requester(sessions, task, "carol")  # the positive control
    async with sessions() as session:
        assert await bound_requester(session, ORG, unvouched) == "alice"
        assert await bound_requester(session, uuid.uuid4(), unvouched) == f"agent:{AGENT}"


async def test_an_unfinished_binding_counts_for_the_agents_unvouched_tasks_only(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    await bind_before_asking(sessions, ORG, AGENT, "alice", "r2")  # the agent never answered
    assert await requester(sessions, agent_task(), "alice")
    assert not await requester(sessions, agent_task(), "carol")
    vouched = agent_task(**{REQUESTER_ANNOTATION: "bob"})
    assert not await requester(sessions, vouched, "alice")
    later = agent_task(created=datetime.now(UTC) + timedelta(days=2))
    assert not await requester(sessions, later, "alice")  # past the lookback
    async with sessions() as session, session.begin():
        await mark_bound(session, "r2", "t-2")
    assert not await requester(sessions, agent_task(), "alice")  # bound: no longer loose


async def test_a_retry_keeps_the_first_binding(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    await bind_before_asking(sessions, ORG, AGENT, "alice", "r3")
    await bind_before_asking(sessions, ORG, AGENT, "mallory", "r3")
    async with sessions() as session, session.begin():
        await mark_bound(session, "r3", "t-3")
        await mark_bound(session, "r3", "t-other")
    async with sessions() as session:
        row = await session.get(PlanBinding, "r3")
    assert row is not None and (row.requester, row.task) == ("alice", "t-3")
