"""The caller's identity and the capability checks, as `Annotated` dependencies.

`CurrentPrincipal` authenticates the bearer token and loads the user, whether it is active
and a platform administrator, and per membership its role and that role's capabilities
(the access map's), fresh for each request, in one query (read once per request:
`request_principal`; straight to the driver on a session that autocommits, the decision
routes', and for `/users/me`: `floor.accounts.principal_on_driver`): a deactivated
user's token is refused at its next request (401 `user_deactivated`), a removed
membership is gone at once. What a request may do in an org comes from the role in that org only:

- `require("cap")` answers the principal narrowed to the orgs whose role holds `cap`
  (403 when none does; a user of no org gets an empty view), so a service scoping its
  queries to `principal.org_ids` never reaches an org where the caller lacks it;
- `require_in_org("cap")`, under `/orgs/{org_id}`, answers 404 for an org the caller is
  not a member of before looking at the capability (existence never leaks), then 403
  unless its role in that org holds `cap`;
- `ensure_capability` is the same check for an org named in a body;
- `require_in_org_or_platform_admin("cap")` is `require_in_org` that also lets a
  platform administrator act on any existing org (404 for none), member or not: what
  keeps an org manageable when its last admin left or demoted itself;
- `require_platform_admin()` guards platform-wide settings: 403
  `platform_admin_required` for anyone else, whatever its roles.

Refusals are audited in a transaction of their own, after the request's own transaction is
rolled back (so its connection is back in the pool before the audit takes one: a refused
request never holds two).
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from platform_api.auth.tokens import TokenIdentity, Tokens
from platform_api.db import Session, Sessions, abandon
from platform_api.errors import Forbidden, NotFound, Unauthenticated
from platform_api.floor.accounts import Caller, OrgOfPath, UserRepository
from platform_api.floor.audit.service import record_detached
from platform_api.floor.capabilities import declare
from platform_api.floor.principal import Grant, OrgScope, Principal
from platform_api.models import Org
from platform_api.openapi import PLATFORM_ADMIN, mark

bearer = HTTPBearer(auto_error=False, description="a JWT from POST /auth/token or the OIDC issuer")


class UserDeactivated(Unauthenticated):
    """The token's user is deactivated: every one of its tokens is refused."""

    code = "user_deactivated"


class PlatformAdminRequired(Forbidden):
    """A platform-wide setting: only platform administrators may change it, whatever
    roles the caller holds in its orgs."""

    code = "platform_admin_required"


async def identity_of(
    tokens: Tokens, credentials: HTTPAuthorizationCredentials | None
) -> TokenIdentity:
    """Who the bearer token names (no database read); 401 `unauthenticated` otherwise."""
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise Unauthenticated("a bearer token is required")
    return await tokens.verify(credentials.credentials)


def principal_from(found: tuple[Caller, dict[uuid.UUID, Grant]] | None) -> Principal:
    """The caller's query's answer as the request's principal: 401 `unauthenticated` for
    no such user, 401 `user_deactivated` for a deactivated one."""
    if found is None:
        raise Unauthenticated("the token's user does not exist")
    user, grants = found
    if user.deactivated_at is not None:
        raise UserDeactivated("the user is deactivated")
    return Principal(user.id, user.username, grants, user.platform_admin)


async def get_principal(
    session: Session,
    tokens: Tokens,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Principal:
    """The authenticated caller; 401 `unauthenticated` otherwise. The caller's query goes
    to the driver when the session autocommits (`UserRepository.principal_of`)."""
    identity = await identity_of(tokens, credentials)
    users = UserRepository(session)
    if identity.username is not None:
        found = await users.principal_of(username=identity.username)
    else:
        assert identity.issuer is not None and identity.subject is not None
        found = await users.principal_of(issuer=identity.issuer, subject=identity.subject)
    return principal_from(found)


async def get_principal_in(
    session: Session,
    tokens: Tokens,
    credentials: HTTPAuthorizationCredentials | None,
    namespace: str,
) -> tuple[Principal, OrgOfPath | None]:
    """`get_principal` for a request naming `namespace` (the decision routes'): the same
    checks and refusals, and beside the caller the org owning `namespace` with its stored
    policy when the caller is a member of it, read by the caller's own statement on a
    session that autocommits (`UserRepository.principal_in`); None otherwise (another
    org's namespace, or SQLite: the route reads the org itself)."""
    identity = await identity_of(tokens, credentials)
    users = UserRepository(session)
    if identity.username is not None:
        found = await users.principal_in(namespace, username=identity.username)
    else:
        assert identity.issuer is not None and identity.subject is not None
        found = await users.principal_in(
            namespace, issuer=identity.issuer, subject=identity.subject
        )
    if found is None:
        return principal_from(None), None  # raises: no such user
    caller, grants, org = found
    return principal_from((caller, grants)), org


_PRINCIPAL = "humanwork_principal"
"""Where a request keeps its caller once read (`request.state`): only for the rest of the
same request (the deactivation guard's read serves the route's), never across requests."""


async def request_principal(
    request: Request,
    session: Session,
    tokens: Tokens,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Principal:
    """`get_principal` read once per request: the caller as the request's first read of
    it found it (the deactivation guard, which runs first, reads it on the routes it
    guards); a refusal is not kept (raised again by the next read)."""
    known = getattr(request.state, _PRINCIPAL, None)
    if isinstance(known, Principal):
        return known
    principal = await get_principal(session, tokens, credentials)
    setattr(request.state, _PRINCIPAL, principal)
    return principal


CurrentPrincipal = Annotated[Principal, Depends(request_principal)]


async def _deny(
    sessions: Sessions,
    request: Request,
    principal: Principal,
    capability: str,
    org_id: uuid.UUID | None,
) -> Forbidden:
    await abandon(request)
    await record_detached(
        sessions,
        actor=principal.username,
        action="access.denied",
        target=f"{request.method} {request.url.path}",
        org_id=org_id,
        details={"capability": capability, "role": principal.role},
    )
    return Forbidden(f"capability {capability} required", capability=capability)


async def holding(
    request: Request, principal: Principal, sessions: Sessions, capability: str
) -> Principal:
    """`require`'s check: the caller narrowed to the orgs whose role holds `capability`;
    403 (audited) when it is a member of some org but no role of its holds it."""
    if principal.grants and not principal.can(capability):
        raise await _deny(sessions, request, principal, capability, None)
    return principal.holding(capability)


def require(capability: str) -> Any:
    """A dependency answering the caller narrowed to the orgs whose role holds
    `capability`; 403 when it is a member of some org but no role of its holds it (a user
    of no org sees nothing: its view is empty)."""
    declare(capability)

    async def check(request: Request, principal: CurrentPrincipal, sessions: Sessions) -> Principal:
        return await holding(request, principal, sessions, capability)

    check.__name__ = f"require_{capability.replace('.', '_')}"
    return Depends(mark(check, [capability]))


def _dependency_name(prefix: str, capabilities: tuple[str, ...]) -> str:
    return prefix + "_".join(c.replace(".", "_") for c in capabilities)


async def _member_scope(
    request: Request,
    org_id: uuid.UUID,
    principal: Principal,
    sessions: Sessions,
    capabilities: tuple[str, ...],
) -> OrgScope:
    """The one org-scope check behind every `/orgs/{org_id}` dependency: 404 unless the
    caller is a member (before looking at any capability, so existence never leaks), then
    403 unless its role there holds one of `capabilities` (all named in the refusal)."""
    named = " or ".join(capabilities)
    if org_id not in principal.org_ids:
        await abandon(request)
        await record_detached(
            sessions,
            actor=principal.username,
            action="access.denied",
            target=f"{request.method} {request.url.path}",
            outcome="not_found",
            details={"capability": named, "reason": "not a member of the org"},
        )
        raise NotFound("no such org")
    if not any(principal.can_in(org_id, c) for c in capabilities):
        raise await _deny(sessions, request, principal.in_org(org_id), named, org_id)
    return OrgScope(principal.in_org(org_id), org_id)


def _in_org(prefix: str, capabilities: tuple[str, ...]) -> Any:
    """A dependency running `_member_scope` for `capabilities` (each declared)."""
    for capability in capabilities:
        declare(capability)

    async def check(
        request: Request, org_id: uuid.UUID, principal: CurrentPrincipal, sessions: Sessions
    ) -> OrgScope:
        return await _member_scope(request, org_id, principal, sessions, capabilities)

    check.__name__ = _dependency_name(prefix, capabilities)
    return Depends(mark(check, capabilities))


def require_in_org(capability: str) -> Any:
    """For `/orgs/{org_id}/...`: 404 unless the caller is a member, then 403 unless it
    holds `capability`; answers the `OrgScope`."""
    return _in_org("require_in_org_", (capability,))


def require_in_org_any(*capabilities: str) -> Any:
    """`require_in_org` for an endpoint that either of several capabilities opens (a
    conversation read by an expert with `tasks.read` or by a client with
    `conversations.participate`): 404 unless the caller is a member, then 403 unless its
    role in that org holds one of `capabilities` (all named in the refusal)."""
    return _in_org("require_in_org_any_", capabilities)


def require_in_org_or_platform_admin(capability: str) -> Any:
    """`require_in_org`, except that a platform administrator acts on any existing org
    (404 for an org that does not exist), whatever its role there."""
    declare(capability)

    async def check(
        request: Request,
        org_id: uuid.UUID,
        session: Session,
        principal: CurrentPrincipal,
        sessions: Sessions,
    ) -> OrgScope:
        if not principal.platform_admin or principal.can_in(org_id, capability):
            return await _member_scope(request, org_id, principal, sessions, (capability,))
        if await session.get(Org, org_id) is None:
            raise NotFound("no such org")
        return OrgScope(principal.in_org(org_id), org_id)

    check.__name__ = _dependency_name("require_in_org_or_platform_admin_", (capability,))
    return Depends(mark(check, [capability, PLATFORM_ADMIN]))


def require_platform_admin() -> Any:
    """A dependency answering the caller when it is a platform administrator; 403
    `platform_admin_required` otherwise (audited)."""

    async def check(request: Request, principal: CurrentPrincipal, sessions: Sessions) -> Principal:
        if not principal.platform_admin:
            await record_detached(
                sessions,
                actor=principal.username,
                action="access.denied",
                target=f"{request.method} {request.url.path}",
                details={"platformAdmin": False, "role": principal.role},
            )
            raise PlatformAdminRequired("a platform administrator is required")
        return principal

    return Depends(mark(check, [PLATFORM_ADMIN]))


async def ensure_capability(
    request: Request,
    principal: Principal,
    sessions: Sessions,
    capability: str,
    org_id: uuid.UUID | None = None,
) -> None:
    """For endpoints that name their org in the body: after the caller's membership was
    checked (404 first, as with `require_in_org`), 403 unless its role in `org_id` (in
    any org in view when None) holds `capability`."""
    allowed = principal.can(capability) if org_id is None else principal.can_in(org_id, capability)
    if not allowed:
        raise await _deny(sessions, request, principal, capability, org_id)
