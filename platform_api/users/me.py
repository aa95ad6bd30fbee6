"""`GET /users/me` on the driver: the caller described from one pooled connection, with no
session and no transaction around its reads.

The token is checked first (no connection for a refused one). Then, on PostgreSQL, the
caller's query (`floor.accounts.principal_on_driver`: the user, its role, platform
administrator flag and deactivation, and per membership the role and its capabilities,
read fresh) and, for a caller of some org, one read of those orgs, both straight to
asyncpg, each its own transaction (two reads: nothing they need commits together). The
user's row is not read again: the caller's query carries what the answer shows. The
401s are the caller check's (`auth.dependencies.principal_from`). On any other database
the same two reads go through a session.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC
from typing import Any

from fastapi import Request
from fastapi.security import HTTPAuthorizationCredentials

from platform_api.auth.dependencies import identity_of, principal_from
from platform_api.auth.tokens import TOKENS, TokenIdentity
from platform_api.db import ENGINE, SESSIONS, driver_connection
from platform_api.floor.accounts import Caller, UserRepository, principal_on_driver
from platform_api.floor.capabilities import ORG_GRANTABLE, PLATFORM
from platform_api.floor.principal import Principal
from platform_api.orgs.repository import OrgRepository
from platform_api.orgs.schemas import OrgRead
from platform_api.users.schemas import Me

ORGS_DRIVER = (
    "SELECT id, slug, name, namespace, created_at, deactivated_at FROM orgs"
    " WHERE id = ANY($1::uuid[]) ORDER BY slug"
)
"""The caller's orgs as `OrgRepository.list_in` reads them (by slug), for the driver."""


def _org(row: Any) -> OrgRead:
    org_id, slug, name, namespace, created_at, deactivated_at = row
    off = None if deactivated_at is None else deactivated_at.astimezone(UTC)
    return OrgRead(
        id=org_id,
        slug=slug,
        name=name,
        namespace=namespace,
        created_at=created_at.astimezone(UTC),
        deactivated_at=off,
    )


def build_me(caller: Caller, principal: Principal, orgs: Iterable[OrgRead]) -> Me:
    """The answer, from the caller's query and its orgs."""
    platform = PLATFORM if principal.platform_admin else frozenset()
    return Me(
        id=caller.id,
        username=caller.username,
        role=caller.role,
        capabilities=sorted((principal.capabilities - {ORG_GRANTABLE}) | platform),
        orgs=list(orgs),
        roles={str(o): principal.grants[o].role for o in sorted(principal.org_ids)},
        platformAdmin=principal.platform_admin,
    )


def _keys(identity: TokenIdentity) -> dict[str, str | None]:
    if identity.username is not None:
        return {"username": identity.username}
    return {"issuer": identity.issuer, "subject": identity.subject}


async def describe_caller(request: Request, credentials: HTTPAuthorizationCredentials | None) -> Me:
    """The caller of `request` described (see the module docstring)."""
    state = request.app.state
    identity = await identity_of(TOKENS.of(state), credentials)
    async with driver_connection(ENGINE.of(state)) as driver:
        if driver is None:
            return await _on_session(request, identity)
        found = await principal_on_driver(driver, **_keys(identity))
        principal = principal_from(found)  # 401s; the connection goes back as it is
        rows: list[Any] = []
        if principal.grants:
            rows = await driver.fetch(ORGS_DRIVER, list(principal.grants))
    assert found is not None
    return build_me(found[0], principal, (_org(r) for r in rows))


async def _on_session(request: Request, identity: TokenIdentity) -> Me:
    """Any other database (SQLite): the same two reads through a session."""
    async with SESSIONS.of(request.app.state)() as session:
        found = await UserRepository(session).principal_of(**_keys(identity))
        principal = principal_from(found)
        assert found is not None
        orgs = await OrgRepository(session).list_in(principal.org_ids)
        await session.commit()
    return build_me(found[0], principal, (OrgRead.model_validate(o) for o in orgs))
