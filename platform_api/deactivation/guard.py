"""The guard: a deactivated org takes no new work.

Every request that changes something (any method but GET, HEAD and OPTIONS) and names an
org in its path (`/orgs/{org_id}/...`) or a namespace (`/agentic/tasks/{namespace}/...`,
`/human-tasks/{namespace}/...`) is answered 409 `org_deactivated` while that org is
deactivated, when the caller is an authenticated member of it (anyone else gets the
route's own 401 or 404, so deactivation leaks nothing); only `/orgs/{org_id}/deactivate`
and `/orgs/{org_id}/reactivate` pass. Reads (the audit log, the archive, the agents'
state) stay open. Endpoints that name their org in the body (creating a task, deciding,
also in bulk, appending to a conversation) check it themselves with
`deactivation.repository.ensure_active`, and so do the endpoints that decide a step (marked
with `checks_activity_itself`; the guard skips them).

Which routes it guards is decided once, as the app is built (`guard_routes`): a route
that cannot need it (a read, a path naming no org, a lifecycle path, a route checking
itself) pays nothing per request. On a guarded route it reads the caller
(`request_principal`, the query the route's own caller check then reuses), whose
memberships carry each org's namespace and deactivated state: no query of its own, on a
connection given back at once (the route may wait for connections of its own).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from fastapi import Depends, Request
from fastapi.routing import APIRoute
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from platform_api.auth.dependencies import bearer, request_principal
from platform_api.auth.tokens import TOKENS, TokenService
from platform_api.db import ENGINE
from platform_api.errors import OrgDeactivated, Unauthenticated
from platform_api.floor.principal import Principal

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
LIFECYCLE_PATHS = ("/deactivate", "/reactivate")
_NAMING = re.compile(r"\{(org_id|namespace)(:[^}]*)?\}")
"""A path parameter naming an org (its id or its namespace)."""

Endpoint = TypeVar("Endpoint", bound=Callable[..., Any])
_CHECKING_THEMSELVES: set[Callable[..., Any]] = set()


def checks_activity_itself(endpoint: Endpoint) -> Endpoint:
    """Mark an endpoint that refuses a deactivated org's work in its own transaction
    (deciding reads the org's policy and active flag in one query, after its membership
    check): the guard does not read it a second time (a round trip and a pooled
    connection on every decision)."""
    _CHECKING_THEMSELVES.add(endpoint)
    return endpoint


def _named_org(request: Request) -> tuple[uuid.UUID | None, str | None] | None:
    """The org id or namespace the path names; None for an org id that is no UUID."""
    org_id, namespace = request.path_params.get("org_id"), request.path_params.get("namespace")
    if org_id is None:
        return None, None if namespace is None else str(namespace)
    try:
        return uuid.UUID(str(org_id)), None
    except ValueError:
        return None


async def _caller(request: Request, engine: AsyncEngine, tokens: TokenService) -> Principal | None:
    """The authenticated caller (None for anyone else), read on a connection of its own
    outside a transaction (one round trip, no BEGIN; the connection back at once: the
    route may open sessions of its own) and kept for the request's own caller check."""
    credentials = await bearer(request)  # not a dependency: no security in the schema
    if credentials is None:
        return None
    async with engine.connect() as conn:
        autocommit = await conn.execution_options(isolation_level="AUTOCOMMIT")
        session = AsyncSession(bind=autocommit)
        try:
            return await request_principal(request, session, tokens, credentials)
        except Unauthenticated:
            return None  # not a member: the route answers for itself
        finally:
            await session.close()


async def refuse_work_of_deactivated_orgs(request: Request) -> None:
    """409 `org_deactivated` for a member's change to a deactivated org (see the module
    docstring); on the routes `guard_routes` chose only."""
    named = _named_org(request)
    if named is None:
        return
    state = request.app.state
    principal = await _caller(request, ENGINE.of(state), TOKENS.of(state))
    if principal is None:
        return
    org_id, namespace = named
    for org, grant in principal.grants.items():
        if (org == org_id or (namespace is not None and grant.namespace == namespace)) and (
            grant.deactivated
        ):
            raise OrgDeactivated("the org is deactivated: it takes no new work")


GUARD = Depends(refuse_work_of_deactivated_orgs)


def guards(path: str, methods: Iterable[str], endpoint: Callable[..., Any]) -> bool:
    """Whether a route of `path` (its template), `methods` and `endpoint` needs the guard."""
    if not set(methods) - SAFE_METHODS or path.endswith(LIFECYCLE_PATHS):
        return False
    return endpoint not in _CHECKING_THEMSELVES and _NAMING.search(path) is not None


def _routes(routes: Iterable[Any], prefix: str = "") -> Iterable[tuple[str, APIRoute]]:
    """Every API route under `routes` with its full path template (through included
    routers)."""
    for route in routes:
        if isinstance(route, APIRoute):
            yield prefix + route.path, route
            continue
        included = getattr(route, "original_router", None)
        if included is not None:
            context = getattr(route, "include_context", None)
            yield from _routes(included.routes, prefix + str(getattr(context, "prefix", "")))


def guard_routes(routes: Iterable[Any]) -> int:
    """Add the guard to each route that needs it (once: a route guarded already is left
    as it is); how many routes it guards."""
    guarded = 0
    for path, route in _routes(routes):
        if guards(path, route.methods or (), route.endpoint):
            guarded += 1
            if not any(d is GUARD for d in route.dependencies):
                route.dependencies.append(GUARD)
    return guarded
