"""Database access of an org's corrections."""

from __future__ import annotations

import uuid

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.models import ExpertCorrection


class CorrectionRepository:
    """Reads and writes the corrections of orgs."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add(self, correction: ExpertCorrection) -> ExpertCorrection:
        self.session.add(correction)
        await self.session.flush()
        return correction

    async def page(
        self, org_id: uuid.UUID, *, limit: int, offset: int
    ) -> tuple[list[ExpertCorrection], int]:
        """A page of the org's corrections, newest first, and how many it has."""
        rows = await self.session.execute(
            select(ExpertCorrection)
            .where(ExpertCorrection.org_id == org_id)
            .order_by(ExpertCorrection.created_at.desc(), ExpertCorrection.id.desc())
            .limit(limit)
            .offset(offset)
        )
        total = await self.session.scalar(
            select(func.count())
            .select_from(ExpertCorrection)
            .where(ExpertCorrection.org_id == org_id)
        )
        return list(rows.scalars()), int(total or 0)

    async def newest(self, org_id: uuid.UUID, limit: int) -> list[ExpertCorrection]:
        """The org's newest `limit` corrections, oldest first."""
        rows, _ = await self.page(org_id, limit=limit, offset=0)
        return list(reversed(rows))
