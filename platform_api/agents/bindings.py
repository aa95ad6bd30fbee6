"""Binding a plan request to the person who asked, before the agent is asked: a
`PlanBinding` row keyed by the plan request's id, committed in a transaction of its own
(`bind_before_asking`), and the task the platform bound it to once the agent answered
(`mark_bound`). `tasks.requester` reads them for the self-approval rule."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from platform_api.models import PlanBinding


async def bind_before_asking(
    sessions: async_sessionmaker[AsyncSession],
    org_id: uuid.UUID,
    agent: str,
    requester: str,
    request_id: str,
    kind: str = "plan",
) -> None:
    """Record that `requester` asked `agent` (plan request `request_id`), committed at once
    in a transaction of its own; a retry of the same request keeps the first record."""
    try:
        async with sessions() as session, session.begin():
            if await session.get(PlanBinding, request_id) is not None:
                return
            session.add(
                PlanBinding(
                    request_id=request_id,
                    org_id=org_id,
                    agent=agent,
                    requester=requester,
                    kind=kind,
                    task=None,
                    created_at=datetime.now(UTC),
                )
            )
    except IntegrityError:  # a concurrent retry of the same request recorded it first
        return


async def mark_bound(session: AsyncSession, request_id: str, task_name: str) -> None:
    """Note the task the platform bound plan request `request_id` to (first one stands)."""
    await session.execute(
        update(PlanBinding)
        .where(PlanBinding.request_id == request_id, PlanBinding.task.is_(None))
        .values(task=task_name)
    )
