"""`GET /orgs/{org_id}/corrections`: the org's expert corrections, newest first."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter

from platform_api.auth.dependencies import require_in_org
from platform_api.bounds import Limit, Offset
from platform_api.corrections.repository import CorrectionRepository
from platform_api.corrections.schemas import CorrectionPage, CorrectionRead
from platform_api.db import Session
from platform_api.errors import error_responses
from platform_api.floor.principal import OrgScope

router = APIRouter(tags=["corrections"])


@router.get(
    "/orgs/{org_id}/corrections",
    response_model=CorrectionPage,
    summary="An org's expert corrections",
    description="Capability `tasks.read` (404 first for an org the caller is not a member "
    "of). What experts changed in the org's agents' drafts and plans (an edited or "
    "rejected reply, an amended or rejected step), newest first. The platform pushes each "
    "to the org's agents when it is made and sends the newest with every chat command, so "
    "they survive agent restarts and reach new replicas.",
    responses=error_responses(401, 403, 404, 422),
)
async def list_corrections(
    session: Session,
    scope: Annotated[OrgScope, require_in_org("tasks.read")],
    limit: Limit = 50,
    offset: Offset = 0,
) -> CorrectionPage:
    rows, total = await CorrectionRepository(session).page(scope.org_id, limit=limit, offset=offset)
    return CorrectionPage(
        items=[CorrectionRead.model_validate(r) for r in rows],
        total=total,
        limit=limit,
        offset=offset,
    )
