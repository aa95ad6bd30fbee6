"""`/users`: create users, bind an OIDC identity, deactivate and reactivate a user, make
a platform administrator, describe the caller."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request, status
from fastapi.security import HTTPAuthorizationCredentials

from platform_api.auth.dependencies import (
    CurrentPrincipal,
    bearer,
    require,
    require_platform_admin,
)
from platform_api.db import Session
from platform_api.errors import error_responses
from platform_api.floor.principal import Principal
from platform_api.openapi import EXTENSION, PLATFORM_ADMIN
from platform_api.users import accounts, service
from platform_api.users.me import describe_caller
from platform_api.users.schemas import (
    Me,
    OidcIdentity,
    PlatformAdminChange,
    UserCreate,
    UserRead,
    UserState,
)

router = APIRouter(prefix="/users", tags=["users"])
Username = Annotated[str, Path(pattern=r"^[A-Za-z0-9._@-]{1,100}$")]
BOUNDS = {403: ("role_not_grantable", "the role holds capabilities the caller lacks in the org")}


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=UserRead,
    summary="Create a user",
    description="Capability `users.manage` in every org named (404 for any other org). The "
    "user gets `role` in each: 422 for a role the access map lacks; 403 "
    "`role_not_grantable` unless the caller may give it there (the platform marks it "
    "`org.grantable` and it holds no capability the caller's role in that org lacks; a "
    "platform administrator may give any role). A user of no org: platform administrators "
    "only (403 `platform_admin_required`).",
    responses=error_responses(401, 403, 404, 409, 422, codes=BOUNDS),
)
async def create_user(
    body: UserCreate,
    session: Session,
    principal: Annotated[Principal, require("users.manage")],
) -> UserRead:
    return await service.create_user(session, principal, body)


@router.put(
    "/{username}/oidc-identity",
    response_model=UserRead,
    summary="Bind a user to an OIDC identity",
    description="Capability `users.manage`. The user's OIDC tokens are then those with this "
    "issuer and `sub` (never matched by email or preferred_username). The user must belong "
    "to at least one org and to none outside the caller's (404 otherwise); 409 when another "
    "user holds the identity; 403 for a user above the caller (`role_not_grantable`, "
    "`platform_admin_required`).",
    responses=error_responses(401, 403, 404, 409, 422, codes=BOUNDS),
)
async def bind_oidc_identity(
    body: OidcIdentity,
    session: Session,
    principal: Annotated[Principal, require("users.manage")],
    username: Username,
) -> UserRead:
    return await service.bind_oidc_identity(session, principal, username, body)


@router.get(
    "/me",
    response_model=Me,
    summary="Who am I",
    description="Any authenticated user (no capability): identity, capabilities, orgs, the "
    "role in each org, whether a platform administrator.",
    responses=error_responses(401),
)
async def me(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Me:
    return await describe_caller(request, credentials)  # the caller's check, on the driver


STATE_CAPABILITY = {EXTENSION: ["users.manage", PLATFORM_ADMIN]}  # checked by the service
_STATE = (
    "Capability `users.manage` in every org the user belongs to, and not below the user "
    "there, or a platform administrator (404 for any other user; 403 `role_not_grantable` "
    "or `platform_admin_required` for a user above the caller); 409 for the caller itself."
)


@router.post(
    "/{username}/deactivate",
    response_model=UserState,
    summary="Deactivate a user",
    description=f"{_STATE} From the commit on, every token of the user is refused (401 "
    "`user_deactivated`) and its open event streams end. Audited `user.deactivated`.",
    responses=error_responses(401, 403, 404, 409, 422, codes=BOUNDS),
    openapi_extra=STATE_CAPABILITY,
)
async def deactivate_user(
    session: Session, principal: CurrentPrincipal, username: Username
) -> UserState:
    return await accounts.set_active(session, principal, username, active=False)


@router.post(
    "/{username}/reactivate",
    response_model=UserState,
    summary="Reactivate a user",
    description=f"{_STATE} The user's tokens are accepted again. Audited `user.reactivated`.",
    responses=error_responses(401, 403, 404, 409, 422, codes=BOUNDS),
    openapi_extra=STATE_CAPABILITY,
)
async def reactivate_user(
    session: Session, principal: CurrentPrincipal, username: Username
) -> UserState:
    return await accounts.set_active(session, principal, username, active=True)


@router.put(
    "/{username}/platform-admin",
    response_model=UserState,
    summary="Make or unmake a platform administrator",
    description="Platform administrators only (403 `platform_admin_required`, an org's "
    "admin included). Platform administrators change the access map, create orgs and "
    "make other platform administrators; no org role grants it. 409 for the caller itself "
    "(so one always remains). Audited `user.platform_admin_changed`.",
    responses=error_responses(
        401, 403, 404, 409, 422, codes={403: ("platform_admin_required", "not a platform admin")}
    ),
)
async def set_platform_admin(
    body: PlatformAdminChange,
    session: Session,
    principal: Annotated[Principal, require_platform_admin()],
    username: Username,
) -> UserState:
    return await accounts.set_platform_admin(session, principal, username, body.platformAdmin)
