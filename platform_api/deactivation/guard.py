"""The app-wide guard: a deactivated org takes no new work.

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
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import Request
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from platform_api.auth.dependencies import bearer, get_principal
from platform_api.auth.tokens import TOKENS, TokenService
from platform_api.db import ENGINE, SESSIONS
from platform_api.errors import OrgDeactivated, Unauthenticated
from platform_api.models import Org

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
LIFECYCLE_PATHS = ("/deactivate", "/reactivate")

Endpoint = TypeVar("Endpoint", bound=Callable[..., Any])
_CHECKING_THEMSELVES: set[Callable[..., Any]] = set()


def checks_activity_itself(endpoint: Endpoint) -> Endpoint:
    """Mark an endpoint that refuses a deactivated org's work in its own transaction
    (deciding reads the org's policy and active flag in one query, after its membership
    check): the guard does not read it a second time (a round trip and a pooled
    connection on every decision)."""
    _CHECKING_THEMSELVES.add(endpoint)
    return endpoint


async def _deactivated_org(
    engine: AsyncEngine, org_id: str | None, namespace: str | None
) -> uuid.UUID | None:
    """The id of the deactivated org the path names, or None."""
    query = select(Org.id).where(Org.deactivated_at.is_not(None))
    if org_id is not None:
        try:
            query = query.where(Org.id == uuid.UUID(org_id))
        except ValueError:
            return None
    else:
        query = query.where(Org.namespace == namespace)
    # one read outside a transaction: no BEGIN and ROLLBACK round trips around it
    async with engine.connect() as conn:
        autocommit = await conn.execution_options(isolation_level="AUTOCOMMIT")
        found: uuid.UUID | None = await autocommit.scalar(query)
        return found


async def _member(
    request: Request,
    sessions: async_sessionmaker[AsyncSession],
    tokens: TokenService,
    org_id: uuid.UUID,
) -> bool:
    """Whether the caller is an authenticated member of `org_id`."""
    credentials = await bearer(request)
    if credentials is None:
        return False
    async with sessions() as session:
        try:
            principal = await get_principal(session, tokens, credentials)
        except Unauthenticated:
            return False
    return org_id in principal.org_ids


async def refuse_work_of_deactivated_orgs(request: Request) -> None:
    """409 `org_deactivated` for a member's change to a deactivated org (see the module
    docstring). Its shared objects are read from their slots only once a request may need
    them: every request of the app passes here, the pages and reads that use no database
    among them."""
    if request.method in SAFE_METHODS or request.url.path.endswith(LIFECYCLE_PATHS):
        return
    if getattr(request.scope.get("route"), "endpoint", None) in _CHECKING_THEMSELVES:
        return
    org_id, namespace = request.path_params.get("org_id"), request.path_params.get("namespace")
    if org_id is None and namespace is None:
        return
    state = request.app.state
    found = await _deactivated_org(
        ENGINE.of(state),
        None if org_id is None else str(org_id),
        None if namespace is None else str(namespace),
    )
    if found is not None and await _member(request, SESSIONS.of(state), TOKENS.of(state), found):
        raise OrgDeactivated("the org is deactivated: it takes no new work")
