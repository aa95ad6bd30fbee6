"""On the shared floor: which steps of a task its initiating client must confirm, from
trusted data only (read by the confirmations slice and the tool proxy).

The initiating client is the task's requester the platform vouched for
(`humanwork_core.requester.requester_of`: the annotation only the platform API writes),
when that user's membership role in the task's org holds `steps.confirm`. The steps it must
confirm are those whose effective risk (never below the action catalog's minimum) is in
`orgs.client_confirm_risks` (null: high and critical; an empty list: none). Nothing an
agent wrote into the task's status decides it; the platform writes the result into the
status (`taskflow.require_confirmation`), and the tool proxy computes it again.
"""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from humanwork_core.policy import effective_risk
from humanwork_core.requester import AGENT_REQUESTER_PREFIX, requester_of
from humanwork_core.resources import AgenticTask, StepKind
from humanwork_core.risk import Risk
from platform_api.floor.capabilities import declare
from platform_api.models import AccessGrant, Membership, Org, User

CONFIRM = declare("steps.confirm")
"""What confirming or declining a step needs (the built-in role `client` holds it)."""

DEFAULT_RISKS = frozenset({Risk.HIGH, Risk.CRITICAL})
"""The risks a client confirms when the org set none (`client_confirm_risks` null)."""


def confirm_risks(org: Org) -> frozenset[Risk]:
    """The risks the org's initiating clients must confirm (unknown names are ignored)."""
    if org.client_confirm_risks is None:
        return DEFAULT_RISKS
    known = {risk.value: risk for risk in Risk}
    return frozenset(known[name] for name in org.client_confirm_risks if name in known)


async def initiating_client(
    session: AsyncSession, org_id: uuid.UUID, task: AgenticTask
) -> str | None:
    """The task's initiating client: its vouched requester when that user is an active
    member of the org whose role holds `steps.confirm`; None otherwise."""
    requester = requester_of(task)
    if not requester or requester.startswith(AGENT_REQUESTER_PREFIX):
        return None
    role = await session.scalar(
        select(Membership.role)
        .join(User, User.id == Membership.user_id)
        .where(
            User.username == requester,
            User.deactivated_at.is_(None),
            Membership.org_id == org_id,
        )
    )
    if role is None:
        return None
    grant = await session.get(AccessGrant, (role, CONFIRM))
    return requester if grant is not None else None


async def steps_to_confirm(
    session: AsyncSession, org_id: uuid.UUID, task: AgenticTask
) -> tuple[str | None, frozenset[str]]:
    """The initiating client and the ids of the action steps it must confirm (none when
    the task has no initiating client)."""
    client = await initiating_client(session, org_id, task)
    org = await session.get(Org, org_id)
    if client is None or org is None:
        return None, frozenset()
    risks = confirm_risks(org)
    return client, frozenset(
        step.id
        for step in task.spec.steps
        if step.kind is StepKind.ACTION and effective_risk(step) in risks
    )
