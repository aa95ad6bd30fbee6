"""Token rotations as audit rows (seed 002 section 4.4).

The operator rotates agents' tokens; the platform learns of a rotation when the agent
first presents its new token (verified against the AgentInstance's `status.token`, as
`agent_api.auth` does on every request). The first request with a jti the audit log has
not seen for that agent appends `agent.token_rotated` to the org's chain, actor
`operator`, with the jti, the previous jti recorded for the agent (null for the first
token seen) and the SHA-256 of the token: never the token. An old token still in its
grace adds nothing; the jtis seen are remembered per process, so only the first request
with a token reads the audit log.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from platform_api.agent_api.identity import Agent
from platform_api.floor.audit.service import record
from platform_api.models import AuditRecord
from platform_api.slots import Slot

ACTION = "agent.token_rotated"


@dataclass
class TokenRotations:
    """The (agent, jti) pairs this process has audited or found audited."""

    seen: set[tuple[str, str]] = field(default_factory=set)

    async def observe(
        self, sessions: async_sessionmaker[AsyncSession], agent: Agent, token: str
    ) -> None:
        """Audit `agent`'s token unless its jti was audited already."""
        key = (agent.agent_id, agent.jti)
        if key in self.seen:
            return
        async with sessions() as session, session.begin():
            if not await _audited(session, agent):
                previous = await _last_jti(session, agent)
                await record(
                    session,
                    actor="operator",
                    action=ACTION,
                    target=f"agent:{agent.agent_id}",
                    org_id=uuid.UUID(agent.org_id),
                    details={
                        "agent": agent.agent_id,
                        "jti": agent.jti,
                        "previous_jti": previous,
                        "token_sha256": hashlib.sha256(token.encode()).hexdigest(),
                    },
                )
        self.seen.add(key)


async def _audited(session: AsyncSession, agent: Agent) -> bool:
    found = await session.execute(
        select(AuditRecord.id)
        .where(
            AuditRecord.org_id == uuid.UUID(agent.org_id),
            AuditRecord.action == ACTION,
            AuditRecord.target == f"agent:{agent.agent_id}",
            AuditRecord.details["jti"].as_string() == agent.jti,
        )
        .limit(1)
    )
    return found.first() is not None


async def _last_jti(session: AsyncSession, agent: Agent) -> str | None:
    found = await session.execute(
        select(AuditRecord.details)
        .where(
            AuditRecord.org_id == uuid.UUID(agent.org_id),
            AuditRecord.action == ACTION,
            AuditRecord.target == f"agent:{agent.agent_id}",
        )
        .order_by(AuditRecord.id.desc())
        .limit(1)
    )
    details = found.scalar()
    return str(details.get("jti")) if isinstance(details, dict) and details.get("jti") else None


ROTATIONS: Slot[TokenRotations] = Slot("rotations")
Rotations = Annotated[TokenRotations, Depends(ROTATIONS)]
"""The agent tokens audited as `agent.token_rotated`."""
