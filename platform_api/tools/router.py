"""`/orgs/{org_id}/tool-permissions`: read (tasks.read) and set (tools.manage)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from platform_api.auth.dependencies import require_in_org
from platform_api.db import Session
from platform_api.errors import error_responses
from platform_api.floor.principal import OrgScope
from platform_api.tools import service
from platform_api.tools.schemas import TOOL_NAME_PATTERN, ToolPermissionRead, ToolPermissionUpdate

router = APIRouter(prefix="/orgs/{org_id}/tool-permissions", tags=["tool permissions"])


@router.get(
    "",
    response_model=list[ToolPermissionRead],
    summary="List an org's tool permissions",
    description="Capability `tasks.read`, in one of the caller's orgs (404 otherwise).",
    responses=error_responses(401, 403, 404, 422),
)
async def list_tool_permissions(
    session: Session, scope: Annotated[OrgScope, require_in_org("tasks.read")]
) -> list[ToolPermissionRead]:
    rows = await service.list_permissions(session, scope)
    return [ToolPermissionRead.model_validate(r) for r in rows]


@router.put(
    "/{tool_name}",
    response_model=ToolPermissionRead,
    summary="Enable or disable a tool",
    description="Capability `tools.manage`, in one of the caller's orgs (404 otherwise). "
    "Creates or replaces the permission of a tool of the action catalog (`GET /tools`; an "
    "alias names its tool; any other: 404 `unknown_tool`); audited.",
    responses=error_responses(401, 403, 404, 422),
)
async def put_tool_permission(
    body: ToolPermissionUpdate,
    session: Session,
    scope: Annotated[OrgScope, require_in_org("tools.manage")],
    tool_name: Annotated[str, Path(pattern=TOOL_NAME_PATTERN, examples=["shopify"])],
) -> ToolPermissionRead:
    permission = await service.set_permission(session, scope, tool_name, body)
    return ToolPermissionRead.model_validate(permission)
