"""Database reads of the managed agents: each agent's last signed event (its heartbeat)."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.models import AgentEvent


async def last_heartbeats(session: AsyncSession, org_id: uuid.UUID) -> dict[str, datetime]:
    """agent id (`<namespace>/<name>`) -> when the platform last received a signed event
    from it."""
    rows = await session.execute(
        select(AgentEvent.agent_id, func.max(AgentEvent.received_at))
        .where(AgentEvent.org_id == org_id)
        .group_by(AgentEvent.agent_id)
    )
    return {agent: at for agent, at in rows.all() if at is not None}
