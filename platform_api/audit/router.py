"""`GET /audit`: the caller's orgs' audit rows, filtered and paginated."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query

from platform_api.audit.schemas import AuditEntry, AuditPage
from platform_api.auth.dependencies import require
from platform_api.bounds import Limit, Offset
from platform_api.db import Session
from platform_api.errors import NotFound, error_responses
from platform_api.floor.audit import service
from platform_api.floor.principal import Principal

router = APIRouter(prefix="/audit", tags=["audit"])


@router.get(
    "",
    response_model=AuditPage,
    summary="Read the audit log",
    description="Capability `audit.read`. Rows of the caller's orgs only (an `org` the caller "
    "is not a member of answers 404), newest first; `since` inclusive, `until` exclusive.",
    responses=error_responses(401, 403, 404, 422),
)
async def list_audit(
    session: Session,
    principal: Annotated[Principal, require("audit.read")],
    org: Annotated[uuid.UUID | None, Query(description="only this org")] = None,
    action: Annotated[str | None, Query(max_length=100, examples=["org.created"])] = None,
    since: Annotated[datetime | None, Query(examples=["2026-01-01T00:00:00Z"])] = None,
    until: Annotated[datetime | None, Query(examples=["2026-02-01T00:00:00Z"])] = None,
    limit: Limit = 50,
    offset: Offset = 0,
) -> AuditPage:
    if org is not None and org not in principal.org_ids:
        raise NotFound("no such org")
    org_ids = [org] if org is not None else sorted(principal.org_ids)
    rows, total = await service.list_records(
        session,
        org_ids=org_ids,
        action=action,
        since=since,
        until=until,
        limit=limit,
        offset=offset,
    )
    next_offset = offset + len(rows) if offset + len(rows) < total else None
    return AuditPage(
        items=[AuditEntry.model_validate(r) for r in rows],
        total=total,
        limit=limit,
        offset=offset,
        next_offset=next_offset,
    )
