"""The record a restore leaves in the database: an audit row `platform.restored` on the
platform chain, saying when the backup was taken and whether the restored audit log is
behind its signed checkpoints (rows written after the backup are gone). The health check
and the metrics read the newest one (`last_restore`)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.models import AuditRecord

RESTORED = "platform.restored"


async def last_restore(session: AsyncSession) -> dict[str, Any] | None:
    """The newest restore's details and time (None: the database was never restored)."""
    row = (
        await session.execute(
            select(AuditRecord.at, AuditRecord.details)
            .where(AuditRecord.action == RESTORED)
            .order_by(AuditRecord.id.desc())
            .limit(1)
        )
    ).first()
    if row is None:
        return None
    details = row.details if isinstance(row.details, dict) else {}
    return {**details, "restored_at": row.at}
