"""`GET|PUT /access-map` (platform administrators only)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter

from platform_api.access_map import service
from platform_api.access_map.schemas import AccessMapRead, AccessMapWrite
from platform_api.auth.dependencies import require_platform_admin
from platform_api.db import Session
from platform_api.errors import error_responses
from platform_api.floor import capabilities
from platform_api.floor.principal import Principal

router = APIRouter(prefix="/access-map", tags=["access map"])

Manager = Annotated[Principal, require_platform_admin()]


def _read(roles: dict[str, list[str]]) -> AccessMapRead:
    return AccessMapRead(roles=roles, capabilities=sorted(capabilities.known()))


@router.get(
    "",
    response_model=AccessMapRead,
    summary="The access map",
    description="Platform administrators only (403 `platform_admin_required` for anyone "
    "else, an org's admin included). Every role and the capabilities it holds, and every "
    "capability the platform checks.",
    responses=error_responses(
        401, 403, codes={403: ("platform_admin_required", "not a platform administrator")}
    ),
)
async def get_access_map(session: Session, principal: Manager) -> AccessMapRead:
    return _read(await service.read(session))


@router.put(
    "",
    response_model=AccessMapRead,
    summary="Replace the access map",
    description="Platform administrators only (403 `platform_admin_required` for anyone "
    "else, an org's admin included; nothing changes). Replaces the whole map (roles left "
    "out are removed); `org.grantable` marks the roles an org's admins may give their "
    "members. 422 `unknown_capability` for a capability the platform checks nowhere; 422 "
    "`platform_capability` for a role holding `access.manage` (platform administrators' "
    "only); 422 `invalid_role` for a role with no capability or a role members hold that "
    "the map leaves out. Audited as `access_map.changed` with the map before and after. In "
    "effect on every replica at the next request (capabilities are read from the database "
    "on each request).",
    responses=error_responses(
        401,
        403,
        422,
        codes={
            403: ("platform_admin_required", "not a platform administrator"),
            422: ("unknown_capability", "unknown capability"),
        },
    ),
)
async def put_access_map(
    body: AccessMapWrite, session: Session, principal: Manager
) -> AccessMapRead:
    return _read(await service.replace(session, principal, body.roles))
