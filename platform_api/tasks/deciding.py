"""What a decision route needs, resolved by one dependency: `Deciding` (the request's
session and transaction, the authenticated caller narrowed to the orgs where it holds
`run.control`, the Kubernetes client and the decision service).

The checks are the ones every route makes, in the same order, by the same functions
(`get_principal`, `holding`, `get_kube`): 401 for a missing, invalid or deactivated
caller, 403 (audited) without `run.control`, 503 without a Kubernetes API; the session's
transaction commits when the route succeeds and rolls back when it raises (`get_session`'s
contract). Only the wiring differs: one coroutine instead of a tree of eight
dependencies (session, sessions, token service, principal, capability, Kubernetes
client, decision service) that FastAPI would solve on every decision. On PostgreSQL the
session runs each statement in its own transaction (`tasks.autocommit`: no BEGIN and
COMMIT round trips; what must commit together does so explicitly).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials
from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.auth.dependencies import bearer, get_principal, holding
from platform_api.auth.tokens import TOKENS
from platform_api.db import SESSIONS
from platform_api.floor.capabilities import DECIDE
from platform_api.floor.principal import Principal
from platform_api.kube.client import KubeClient
from platform_api.openapi import mark
from platform_api.state import KUBE, get_kube
from platform_api.tasks.autocommit import autocommitting
from platform_api.tasks.decisions import DECIDER, DecisionService


@dataclass(frozen=True, slots=True)
class Deciding:
    """A decision request's session, caller, Kubernetes client and decision service."""

    session: AsyncSession
    principal: Principal
    kube: KubeClient
    decider: DecisionService


async def deciding(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> AsyncIterator[Deciding]:
    """The one dependency of a decision route (see the module docstring)."""
    state = request.app.state
    sessions = SESSIONS.of(state)
    async with sessions() as session:
        request.state.session = session  # for `abandon`, as `get_session` does
        try:
            await autocommitting(session)
            principal = await get_principal(session, TOKENS.of(state), credentials)
            principal = await holding(request, principal, sessions, DECIDE)
            kube = await get_kube(KUBE.of(state))
            yield Deciding(session, principal, kube, DECIDER.of(state))
        except BaseException:
            await session.rollback()
            raise
        await session.commit()


Decide = Annotated[Deciding, Depends(mark(deciding, [DECIDE]), scope="function")]
"""A decision route's session, caller (holding `run.control`), Kubernetes client and
decision service, in one dependency."""
