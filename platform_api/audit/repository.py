"""Database access of the audit log: append under the chain head's row lock, list with
filters, and read whole chains for verification."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.audit.chain import GENESIS, ChainRow, content_of, row_hash
from platform_api.models import AuditChainHead, AuditRecord, utcnow


class AuditRepository:
    """Reads and appends audit rows through one session."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def _locked_head(self, chain: str) -> AuditChainHead:
        dialect = self.session.bind.dialect.name if self.session.bind else "postgresql"
        insert = pg_insert if dialect == "postgresql" else sqlite_insert
        await self.session.execute(
            insert(AuditChainHead)
            .values(chain=chain, seq=0, hash=GENESIS)
            .on_conflict_do_nothing(index_elements=["chain"])
        )
        head = (
            await self.session.execute(
                select(AuditChainHead)
                .where(AuditChainHead.chain == chain)
                .with_for_update()
                .execution_options(populate_existing=True)
            )
        ).scalar_one()
        return head

    async def append(
        self,
        *,
        chain: str,
        org_id: uuid.UUID | None,
        actor: str,
        action: str,
        target: str,
        outcome: str,
        details: dict[str, Any],
    ) -> AuditRecord:
        """Append one row at the end of `chain` (serialised by the head's row lock)."""
        head = await self._locked_head(chain)
        seq, at = head.seq + 1, utcnow()
        content = content_of(
            chain=chain,
            seq=seq,
            org_id=str(org_id) if org_id else None,
            at=at,
            actor=actor,
            action=action,
            target=target,
            outcome=outcome,
            details=details,
        )
        record = AuditRecord(
            chain=chain,
            seq=seq,
            org_id=org_id,
            at=at,
            actor=actor,
            action=action,
            target=target,
            outcome=outcome,
            details=dict(details),
            prev_hash=head.hash,
            hash=row_hash(content, head.hash),
        )
        self.session.add(record)
        head.seq, head.hash = seq, record.hash
        await self.session.flush()
        return record

    async def list_for(
        self,
        *,
        org_ids: Sequence[uuid.UUID],
        action: str | None,
        since: datetime | None,
        until: datetime | None,
        limit: int,
        offset: int,
    ) -> tuple[list[AuditRecord], int]:
        """Rows of the given orgs matching the filters, newest first, and their total."""
        where: list[ColumnElement[bool]] = [AuditRecord.org_id.in_(list(org_ids))]
        if action:
            where.append(AuditRecord.action == action)
        if since:
            where.append(AuditRecord.at >= since)
        if until:
            where.append(AuditRecord.at < until)
        total = (
            await self.session.execute(select(func.count()).select_from(AuditRecord).where(*where))
        ).scalar_one()
        rows = (
            await self.session.execute(
                select(AuditRecord)
                .where(*where)
                .order_by(AuditRecord.at.desc(), AuditRecord.id.desc())
                .limit(limit)
                .offset(offset)
            )
        ).scalars()
        return list(rows), int(total)

    async def chains(self) -> dict[str, tuple[list[ChainRow], tuple[int, str] | None]]:
        """Every chain's rows in sequence order and its head, for verification."""
        out: dict[str, tuple[list[ChainRow], tuple[int, str] | None]] = {}
        heads = (await self.session.execute(select(AuditChainHead))).scalars()
        for head in heads:
            out[head.chain] = ([], (head.seq, head.hash))
        records = (
            await self.session.execute(
                select(AuditRecord).order_by(AuditRecord.chain, AuditRecord.seq, AuditRecord.id)
            )
        ).scalars()
        for r in records:
            rows, _ = out.setdefault(r.chain, ([], None))
            content = content_of(
                chain=r.chain,
                seq=r.seq,
                org_id=str(r.org_id) if r.org_id else None,
                at=r.at,
                actor=r.actor,
                action=r.action,
                target=r.target,
                outcome=r.outcome,
                details=r.details,
            )
            rows.append(ChainRow(r.id, content, r.prev_hash, r.hash))
        return out
