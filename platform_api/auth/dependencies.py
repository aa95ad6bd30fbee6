"""The caller's identity and the capability checks, as `Annotated` dependencies.

`CurrentPrincipal` authenticates the bearer token and loads the user's role, capabilities
(from the access map) and org memberships fresh for each request, in one query. Every endpoint names
its capability with `require("cap")` or, under `/orgs/{org_id}`, `require_in_org("cap")`;
the latter answers 404 for an org the caller is not a member of before looking at the
capability, so existence never leaks. Refusals are audited in a transaction of their own,
after the request's own transaction is rolled back (so its connection is back in the pool
before the audit takes one: a refused request never holds two).
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from platform_api.access.capabilities import declare
from platform_api.access.principal import OrgScope, Principal
from platform_api.accounts.repository import UserRepository
from platform_api.audit.service import record_detached
from platform_api.db import Session, abandon
from platform_api.errors import Forbidden, NotFound, Unauthenticated
from platform_api.models import User
from platform_api.state import PlatformDep

bearer = HTTPBearer(auto_error=False, description="a JWT from POST /auth/token or the OIDC issuer")


async def get_principal(
    session: Session,
    platform: PlatformDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Principal:
    """The authenticated caller; 401 `unauthenticated` otherwise."""
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise Unauthenticated("a bearer token is required")
    identity = await platform.tokens.verify(credentials.credentials)
    if identity.username is not None:
        where = User.username == identity.username
    else:
        assert identity.issuer is not None and identity.subject is not None
        where = (User.oidc_issuer == identity.issuer) & (User.oidc_subject == identity.subject)
    found = await UserRepository(session).principal_of(where)
    if found is None:
        raise Unauthenticated("the token's user does not exist")
    user, capabilities, org_ids = found
    return Principal(user.id, user.username, user.role, capabilities, org_ids)


CurrentPrincipal = Annotated[Principal, Depends(get_principal)]


async def _deny(
    platform: PlatformDep,
    request: Request,
    principal: Principal,
    capability: str,
    org_id: uuid.UUID | None,
) -> Forbidden:
    await abandon(request)
    await record_detached(
        platform.sessions,
        actor=principal.username,
        action="access.denied",
        target=f"{request.method} {request.url.path}",
        org_id=org_id,
        details={"capability": capability, "role": principal.role},
    )
    return Forbidden(f"capability {capability} required", capability=capability)


def require(capability: str) -> Any:
    """A dependency answering the caller when its role holds `capability`, 403 otherwise."""
    declare(capability)

    async def check(
        request: Request, principal: CurrentPrincipal, platform: PlatformDep
    ) -> Principal:
        if not principal.can(capability):
            raise await _deny(platform, request, principal, capability, None)
        return principal

    check.__name__ = f"require_{capability.replace('.', '_')}"
    return Depends(check)


def require_in_org(capability: str) -> Any:
    """For `/orgs/{org_id}/...`: 404 unless the caller is a member, then 403 unless it
    holds `capability`; answers the `OrgScope`."""
    declare(capability)

    async def check(
        request: Request, org_id: uuid.UUID, principal: CurrentPrincipal, platform: PlatformDep
    ) -> OrgScope:
        if org_id not in principal.org_ids:
            await abandon(request)
            await record_detached(
                platform.sessions,
                actor=principal.username,
                action="access.denied",
                target=f"{request.method} {request.url.path}",
                outcome="not_found",
                details={"capability": capability, "reason": "not a member of the org"},
            )
            raise NotFound("no such org")
        if not principal.can(capability):
            raise await _deny(platform, request, principal, capability, org_id)
        return OrgScope(principal, org_id)

    check.__name__ = f"require_in_org_{capability.replace('.', '_')}"
    return Depends(check)


async def ensure_capability(
    request: Request,
    principal: Principal,
    platform: PlatformDep,
    capability: str,
    org_id: uuid.UUID | None = None,
) -> None:
    """For endpoints that name their org in the body: after the caller's membership was
    checked (404 first, as with `require_in_org`), 403 unless it holds `capability`."""
    if not principal.can(capability):
        raise await _deny(platform, request, principal, capability, org_id)
