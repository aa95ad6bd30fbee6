"""Audit use cases: record an event in the right chain, record a denial in its own
transaction (so it survives the refused request), list for a caller, verify a database."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from platform_api.floor.audit.chain import PLATFORM_CHAIN, Problem, verify_chain
from platform_api.floor.audit.repository import AuditRepository
from platform_api.models import AuditRecord


def chain_of(org_id: uuid.UUID | None) -> str:
    """The chain an event of `org_id` belongs to (`platform` for org-less events)."""
    return str(org_id) if org_id else PLATFORM_CHAIN


TARGET_LENGTH = 300
"""The length of the audit log's `target` column (platform_api/models.py)."""


def fit_target(target: str) -> str:
    """`target` cut to the column, marked with `…` where cut: the method and path of a
    refused request, or an agent id (63 + 253 characters), can be longer."""
    return target if len(target) <= TARGET_LENGTH else target[: TARGET_LENGTH - 1] + "…"


async def record(
    session: AsyncSession,
    *,
    actor: str,
    action: str,
    target: str,
    org_id: uuid.UUID | None = None,
    outcome: str = "success",
    details: dict[str, Any] | None = None,
) -> AuditRecord:
    """Append an event inside the caller's transaction (it commits with the change)."""
    return await AuditRepository(session).append(
        chain=chain_of(org_id),
        org_id=org_id,
        actor=actor,
        action=action,
        target=fit_target(target),
        outcome=outcome,
        details=details or {},
    )


async def carries_key(
    session: AsyncSession, *, org_id: uuid.UUID | None, action: str, target: str, key: str
) -> bool:
    """Whether the org's chain holds an `action` row on `target` whose details carry the
    idempotency key `key` (a decision written before its process died may lack its row)."""
    rows = await AuditRepository(session).details_of(org_id, action, fit_target(target))
    return any(details.get("idempotency_key") == key for details in rows)


async def record_detached(
    sessions: async_sessionmaker[AsyncSession],
    *,
    actor: str,
    action: str,
    target: str,
    org_id: uuid.UUID | None = None,
    outcome: str = "denied",
    details: dict[str, Any] | None = None,
) -> None:
    """Append an event in a transaction of its own (for refusals, which roll back)."""
    async with sessions() as session, session.begin():
        await record(
            session,
            actor=actor,
            action=action,
            target=target,
            org_id=org_id,
            outcome=outcome,
            details=details,
        )


async def list_records(
    session: AsyncSession,
    *,
    org_ids: list[uuid.UUID],
    action: str | None,
    since: datetime | None,
    until: datetime | None,
    limit: int,
    offset: int,
) -> tuple[list[AuditRecord], int]:
    """The caller's orgs' audit rows (newest first) and how many match in total."""
    return await AuditRepository(session).list_for(
        org_ids=org_ids, action=action, since=since, until=until, limit=limit, offset=offset
    )


async def verify(session: AsyncSession) -> list[Problem]:
    """Every inconsistency in every chain of the database (empty when intact)."""
    problems: list[Problem] = []
    for chain, (rows, head) in sorted((await AuditRepository(session).chains()).items()):
        problems.extend(verify_chain(chain, rows, head))
    return problems
