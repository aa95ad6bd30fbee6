"""`/users`: create users (admin) and describe the caller."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, status

from platform_api.access.principal import Principal
from platform_api.auth.dependencies import CurrentPrincipal, require
from platform_api.db import Session
from platform_api.errors import error_responses
from platform_api.users import service
from platform_api.users.schemas import Me, OidcIdentity, UserCreate, UserRead

router = APIRouter(prefix="/users", tags=["users"])


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=UserRead,
    summary="Create a user",
    description="Capability `users.manage`. The role must exist in the access map and every "
    "org must be one of the caller's (404 otherwise).",
    responses=error_responses(401, 403, 404, 409, 422),
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
    "user holds the identity.",
    responses=error_responses(401, 403, 404, 409, 422),
)
async def bind_oidc_identity(
    body: OidcIdentity,
    session: Session,
    principal: Annotated[Principal, require("users.manage")],
    username: Annotated[str, Path(pattern=r"^[A-Za-z0-9._@-]{1,100}$")],
) -> UserRead:
    return await service.bind_oidc_identity(session, principal, username, body)


@router.get(
    "/me",
    response_model=Me,
    summary="Who am I",
    description="Any authenticated user (no capability): identity, role, capabilities, orgs.",
    responses=error_responses(401),
)
async def me(session: Session, principal: CurrentPrincipal) -> Me:
    return await service.describe(session, principal)
