"""The org's active flag (`orgs.deactivated_at`), read from the database every time: one
primary-key or unique-index read, never cached, so every replica sees a deactivation at
once."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from platform_api.errors import OrgDeactivated
from platform_api.models import Org


async def is_deactivated(session: AsyncSession, org_id: uuid.UUID | str) -> bool:
    """True when the org exists and is deactivated."""
    try:
        key = org_id if isinstance(org_id, uuid.UUID) else uuid.UUID(str(org_id))
    except ValueError:
        return False
    found = await session.scalar(select(Org.deactivated_at).where(Org.id == key))
    return found is not None


async def ensure_active(session: AsyncSession, org_id: uuid.UUID | str) -> None:
    """409 `org_deactivated` when the org is deactivated."""
    if await is_deactivated(session, org_id):
        raise OrgDeactivated("the org is deactivated", orgId=str(org_id))


async def deactivated_now(
    sessions: async_sessionmaker[AsyncSession], org_id: uuid.UUID | str
) -> bool:
    """`is_deactivated` in a short transaction of its own (for callers without a session)."""
    async with sessions() as session:
        return await is_deactivated(session, org_id)
