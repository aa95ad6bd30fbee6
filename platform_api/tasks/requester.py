"""Who counts as a task's requester for the self-approval rule (issue 12, item 3).

The requester the platform vouches for (`humanwork_core.requester.requester_of`) may not
approve the task's steps. A task an agent created without a vouched requester says
`agent:<name>`; a compromised agent could leave the plan request's id off on purpose so
that the person who asked could approve their own plan. So a person who asked that agent
for a plan the platform could not bind to a task (audited `task.plan_requested` with
`requesterBound: false`), from a day before the task was created on, counts as its
requester too.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from humanwork_core.requester import agent_requester, requester_of
from humanwork_core.resources import AgenticTask
from platform_api.models import AuditRecord

UNBOUND_LOOKBACK = timedelta(days=1)
"""How long before an unvouched task's creation an unbound plan request still counts."""


async def is_requester(
    session: AsyncSession, org_id: uuid.UUID, task: AgenticTask, username: str
) -> bool:
    """Whether `username` is, or may be, the requester of `task`."""
    requester = requester_of(task)
    if requester == username:
        return True
    agent = task.spec.agent_ref.name
    if requester != agent_requester(agent):
        return False
    created = task.metadata.creation_timestamp or datetime.now(UTC)
    rows = await session.scalars(
        select(AuditRecord.details).where(
            AuditRecord.org_id == org_id,
            AuditRecord.action == "task.plan_requested",
            AuditRecord.actor == username,
            AuditRecord.at >= created - UNBOUND_LOOKBACK,
        )
    )
    agent_id = f"{task.metadata.namespace}/{agent}"
    return any(
        details.get("agent") == agent_id and details.get("requesterBound") is False
        for details in rows
    )
