"""Database access of the audit log: append under the chain head's row lock, list with
filters, and read whole chains for verification.

On PostgreSQL an append is one statement (`APPEND_SQL`): it locks the chain's head, takes
the time, moves the head (the row's hash computed by the database from the pieces
`chain.hash_pieces` cuts) and inserts the row, so the head's lock, which serialises an
org's appends until the transaction commits, is taken one round trip before the commit
at most. SQLite (tests) takes the lock, reads the head and writes in separate steps."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, ColumnElement, LargeBinary, bindparam, func, select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.db import autocommit_driver
from platform_api.floor.audit.chain import (
    GENESIS,
    HASHED_TIMESTAMP_SQL,
    ChainRow,
    content_of,
    hash_pieces,
    row_hash,
)
from platform_api.models import AuditChainHead, AuditRecord, UTCDateTime, utcnow

_STAMP = HASHED_TIMESTAMP_SQL.format(at="stamped.at")
_APPEND = f"""
    WITH old AS (
        SELECT seq, hash FROM audit_chain_heads WHERE chain = {{chain}} FOR UPDATE
    ), stamped AS (
        SELECT seq + 1 AS seq, hash AS prev_hash, clock_timestamp() AS at FROM old
    ), head AS (
        UPDATE audit_chain_heads AS h
        SET seq = stamped.seq,
            hash = encode(sha256(
                CAST({{p0}} AS bytea) || convert_to({_STAMP}, 'UTF8')
                || CAST({{p1}} AS bytea) || convert_to(stamped.seq::text, 'UTF8')
                || CAST({{p2}} AS bytea) || convert_to(stamped.prev_hash, 'UTF8')
                || CAST({{p3}} AS bytea)
            ), 'hex')
        FROM stamped
        WHERE h.chain = {{chain}}
        RETURNING h.seq, h.hash, stamped.prev_hash, stamped.at
    )
    INSERT INTO audit_log
        (chain, seq, org_id, at, actor, action, target, outcome, details, prev_hash, hash)
    SELECT {{chain}}, head.seq, CAST({{org_id}} AS uuid), head.at, {{actor}}, {{action}},
        {{target}}, {{outcome}}, CAST({{details}} AS json), head.prev_hash, head.hash
    FROM head
    RETURNING id, seq, at, prev_hash, hash
    """
_PARAMETERS = ("chain", "org_id", "actor", "action", "target", "outcome", "details")
_PIECES = ("p0", "p1", "p2", "p3")

APPEND_SQL = (
    text(_APPEND.format(**{name: f":{name}" for name in (*_PARAMETERS, *_PIECES)}))
    .bindparams(
        bindparam("p0", type_=LargeBinary),
        bindparam("p1", type_=LargeBinary),
        bindparam("p2", type_=LargeBinary),
        bindparam("p3", type_=LargeBinary),
        bindparam("details", type_=JSON),
    )
    .columns(at=UTCDateTime())
)
"""One append on PostgreSQL: lock the head, stamp, move the head, insert the row."""

_CASTS = {"org_id": "text", "details": "text", **{piece: "bytea" for piece in _PIECES}}
APPEND_DRIVER_SQL = _APPEND.format(
    **{
        name: f"${number}::{_CASTS.get(name, 'varchar')}"
        for number, name in enumerate((*_PARAMETERS, *_PIECES), start=1)
    }
)
"""`APPEND_SQL` as the driver (asyncpg) takes it: numbered parameters, each typed, the
details as JSON text, for a session whose statements each commit on their own
(`db.autocommit_driver`)."""


class AuditRepository:
    """Reads and appends audit rows through one session."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    @property
    def _dialect(self) -> str:
        return self.session.bind.dialect.name if self.session.bind else "postgresql"

    async def _ensure_head(self, chain: str) -> None:
        insert = pg_insert if self._dialect == "postgresql" else sqlite_insert
        await self.session.execute(
            insert(AuditChainHead)
            .values(chain=chain, seq=0, hash=GENESIS)
            .on_conflict_do_nothing(index_elements=["chain"])
        )

    async def _locked_head(self, chain: str) -> AuditChainHead:
        await self._ensure_head(chain)
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
        record = AuditRecord(
            chain=chain,
            org_id=org_id,
            actor=actor,
            action=action,
            target=target,
            outcome=outcome,
            details=dict(details),
        )
        if self._dialect == "postgresql":
            return await self._append_in_one_statement(record)
        return await self._append_stepwise(record)

    async def _append_stepwise(self, record: AuditRecord) -> AuditRecord:
        """Lock and read the head, hash the row here, write the row and the head."""
        head = await self._locked_head(record.chain)
        record.seq, record.at = head.seq + 1, utcnow()
        record.prev_hash = head.hash
        record.hash = row_hash(_content(record), head.hash)
        self.session.add(record)
        head.seq, head.hash = record.seq, record.hash
        await self.session.flush()
        return record

    async def _append_in_one_statement(self, record: AuditRecord) -> AuditRecord:
        """`APPEND_SQL`; a chain without a head yet gets one first (its first append). A
        session whose statements each commit on their own sends it to the driver itself
        (`APPEND_DRIVER_SQL`: the same statement, without SQLAlchemy's execution)."""
        fields = _fields(record)
        pieces = hash_pieces(**fields)
        driver = autocommit_driver(self.session)
        if driver is not None:
            values = [fields[name] for name in ("chain", "org_id", "actor", "action")]
            values += [fields["target"], fields["outcome"], json.dumps(fields["details"])]
            row = await driver.fetchrow(APPEND_DRIVER_SQL, *values, *pieces)
            if row is None:
                await self._ensure_head(record.chain)
                row = await driver.fetchrow(APPEND_DRIVER_SQL, *values, *pieces)
            record.id, record.seq, record.at = row["id"], row["seq"], row["at"].astimezone(UTC)
            record.prev_hash, record.hash = row["prev_hash"], row["hash"]
            return record
        p0, p1, p2, p3 = pieces
        params = {**fields, "org_id": record.org_id, "p0": p0, "p1": p1, "p2": p2, "p3": p3}
        found = (await self.session.execute(APPEND_SQL, params)).one_or_none()
        if found is None:
            await self._ensure_head(record.chain)
            found = (await self.session.execute(APPEND_SQL, params)).one()
        record.id, record.seq, record.at = found.id, found.seq, found.at
        record.prev_hash, record.hash = found.prev_hash, found.hash
        return record

    async def details_of(
        self, org_id: uuid.UUID | None, action: str, target: str
    ) -> list[dict[str, Any]]:
        """The details of the org's `action` rows on `target` (oldest first)."""
        rows = await self.session.scalars(
            select(AuditRecord.details)
            .where(
                AuditRecord.org_id == org_id,
                AuditRecord.action == action,
                AuditRecord.target == target,
            )
            .order_by(AuditRecord.id)
        )
        return [dict(details or {}) for details in rows]

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
            rows.append(ChainRow(r.id, _content(r), r.prev_hash, r.hash))
        return out


def _fields(record: AuditRecord) -> dict[str, Any]:
    """The hashed fields of a row that its writer decides (the chain's head decides `seq`
    and `at`), as `chain.content_of` and `chain.hash_pieces` take them."""
    return {
        "chain": record.chain,
        "org_id": str(record.org_id) if record.org_id else None,
        "actor": record.actor,
        "action": record.action,
        "target": record.target,
        "outcome": record.outcome,
        "details": record.details,
    }


def _content(record: AuditRecord) -> dict[str, Any]:
    """The hashed content of a row (`chain.content_of`)."""
    return content_of(seq=record.seq, at=record.at, **_fields(record))
