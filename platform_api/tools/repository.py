"""Database access of tool permissions (always by org)."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.models import ToolPermission


class ToolPermissionRepository:
    """Reads and writes one org's tool permissions."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def list_for(self, org_id: uuid.UUID) -> list[ToolPermission]:
        result = await self.session.execute(
            select(ToolPermission)
            .where(ToolPermission.org_id == org_id)
            .order_by(ToolPermission.tool)
        )
        return list(result.scalars())

    async def get(self, org_id: uuid.UUID, tool: str) -> ToolPermission | None:
        return await self.session.get(ToolPermission, (org_id, tool), with_for_update=True)

    async def save(self, permission: ToolPermission) -> ToolPermission:
        self.session.add(permission)
        await self.session.flush()
        return permission
