"""Who asked for a task, bound before the agent is asked, and who counts as its requester
for the self-approval rule.

Every plan request the platform sends an agent (`agents.planning`, and the revisions it
asks for, `revisions.service`) is first recorded as a `PlanBinding` (`agents.bindings`),
keyed by the plan request's id (`humanwork_core.requester.plan_request_id`), with the
person who asked, in a transaction of its own committed before the agent is called. What
the agent does next cannot undo it: a task carrying that request's id (annotation
`humanwork.io/plan-request`) has that requester whatever else it says, whether the agent
answered in time, late, with an error or with another task's name. A binding the platform
could not complete (`task` still null) makes its requester a requester of every task of
that agent no one was vouched for (`spec.requestedBy: agent:<name>`) created before it or
at most a day after it, since a compromised agent may leave the id off on purpose. Before
bindings existed the same rule read the audit (`task.plan_requested` with
`requesterBound: false`); it still does, for requests made before the upgrade.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from humanwork_core.requester import PLAN_REQUEST_ANNOTATION, agent_requester, requester_of
from humanwork_core.resources import AgenticTask
from platform_api.models import AuditRecord, PlanBinding

UNBOUND_LOOKBACK = timedelta(days=1)
"""How long before an unvouched task's creation an unbound plan request still counts."""


async def bound_requester(session: AsyncSession, org_id: uuid.UUID, task: AgenticTask) -> str:
    """The task's requester: the person bound to the plan request it carries, else
    `requester_of` (the annotation the platform wrote, or `spec.requestedBy`)."""
    binding = await _binding_of(session, org_id, task)
    return binding.requester if binding is not None else requester_of(task)


async def _binding_of(
    session: AsyncSession, org_id: uuid.UUID, task: AgenticTask
) -> PlanBinding | None:
    request_id = task.metadata.annotations.get(PLAN_REQUEST_ANNOTATION)
    if not request_id or len(request_id) > 64:
        return None
    binding = await session.get(PlanBinding, request_id)
    return binding if binding is not None and binding.org_id == org_id else None


async def is_requester(
    session: AsyncSession, org_id: uuid.UUID, task: AgenticTask, username: str
) -> bool:
    """Whether `username` is, or may be, the requester of `task`."""
    requester = requester_of(task)
    if requester == username:
        return True
    binding = await _binding_of(session, org_id, task)
    if binding is not None and binding.requester == username:
        return True  # bound before the agent was asked, whatever the task says
    agent = task.spec.agent_ref.name
    if requester != agent_requester(agent):
        return False
    since = (task.metadata.creation_timestamp or datetime.now(UTC)) - UNBOUND_LOOKBACK
    unbound = await session.scalar(
        select(PlanBinding.request_id)
        .where(
            PlanBinding.org_id == org_id,
            PlanBinding.agent == agent,
            PlanBinding.requester == username,
            PlanBinding.task.is_(None),
            PlanBinding.created_at >= since,
        )
        .limit(1)
    )
    return unbound is not None or await _unbound_in_audit(session, org_id, task, username, since)


async def _unbound_in_audit(
    session: AsyncSession,
    org_id: uuid.UUID,
    task: AgenticTask,
    username: str,
    since: datetime,
) -> bool:
    """The rule as the audit recorded it before bindings existed."""
    rows = await session.scalars(
        select(AuditRecord.details).where(
            AuditRecord.org_id == org_id,
            AuditRecord.action == "task.plan_requested",
            AuditRecord.actor == username,
            AuditRecord.at >= since,
        )
    )
    agent_id = f"{task.metadata.namespace}/{task.spec.agent_ref.name}"
    return any(
        details.get("agent") == agent_id and details.get("requesterBound") is False
        for details in rows
    )
