"""Database access of encrypted integration credentials (always by org)."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.models import IntegrationCredential


class IntegrationRepository:
    """Reads, writes and deletes one org's sealed credentials."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def list_for(self, org_id: uuid.UUID) -> list[IntegrationCredential]:
        result = await self.session.execute(
            select(IntegrationCredential)
            .where(IntegrationCredential.org_id == org_id)
            .order_by(IntegrationCredential.type)
        )
        return list(result.scalars())

    async def all(self) -> list[IntegrationCredential]:
        result = await self.session.execute(select(IntegrationCredential).with_for_update())
        return list(result.scalars())

    async def get(self, org_id: uuid.UUID, integration_type: str) -> IntegrationCredential | None:
        return await self.session.get(
            IntegrationCredential, (org_id, integration_type), with_for_update=True
        )

    async def save(self, credential: IntegrationCredential) -> None:
        self.session.add(credential)
        await self.session.flush()

    async def delete(self, credential: IntegrationCredential) -> None:
        await self.session.delete(credential)
        await self.session.flush()
