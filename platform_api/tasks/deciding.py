"""What a decision route needs, resolved by one dependency: `Deciding` (the request's
session and transaction, the authenticated caller narrowed to the orgs where it holds
`run.control`, the Kubernetes client and the decision service).

The checks are the ones every route makes, in the same order, by the same functions
(`get_principal`, `holding`, `get_kube`): 401 for a missing, invalid or deactivated
caller, 403 (audited) without `run.control`, 503 without a Kubernetes API; the session's
transaction commits when the route succeeds and rolls back when it raises (`get_session`'s
contract). Only the wiring differs: one coroutine instead of a tree of eight
dependencies (session, sessions, token service, principal, capability, Kubernetes
client, decision service) that FastAPI would solve on every decision, and a plain one, not
a yield dependency (FastAPI wraps those in a context manager, a cancel scope and a shielded
exit on every request): the session's end is an exit callback on the stack FastAPI exits
once the answer is built (`ending`), where a yield dependency's end would run. On
PostgreSQL the session runs each statement in its own transaction (`tasks.autocommit`: no
BEGIN and COMMIT round trips; what must commit together does so explicitly), so that end
sends nothing to the server: the caller's query goes straight to the driver as well
(`floor.accounts.principal_of`). On a route whose path names the task's namespace that
query also reads the org of that namespace, when the caller is a member of it, with its
stored approval policy (`floor.accounts.principal_in_on_driver`, `Deciding.org`): the
decision then sends no read of the org's policy and active flag of its own. A path whose
namespace no Kubernetes namespace can have (upper case, a NUL, too long) names no org:
the caller alone is read, and the path's own check then refuses the request (422).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Annotated

from anyio import CancelScope
from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials
from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.auth.dependencies import bearer, get_principal, get_principal_in, holding
from platform_api.auth.tokens import TOKENS
from platform_api.db import SESSIONS, autocommit_driver
from platform_api.floor.accounts import OrgOfPath
from platform_api.floor.capabilities import DECIDE
from platform_api.floor.principal import Principal
from platform_api.kube.client import KubeClient
from platform_api.openapi import mark
from platform_api.state import KUBE, get_kube
from platform_api.steps.http import a_namespace
from platform_api.tasks.autocommit import autocommitting
from platform_api.tasks.decisions import DECIDER, DecisionService


@dataclass(frozen=True, slots=True)
class Deciding:
    """A decision request's session, caller, Kubernetes client and decision service."""

    session: AsyncSession
    principal: Principal
    kube: KubeClient
    decider: DecisionService
    org: OrgOfPath | None = None
    """The org of the path's namespace with its stored policy, read with the caller (on
    PostgreSQL, when the caller is a member of it): the decision reads no policy again."""


async def deciding(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Deciding:
    """The one dependency of a decision route (see the module docstring)."""
    state = request.app.state
    sessions = SESSIONS.of(state)
    session = sessions()
    ending(request).push_async_exit(_ender(session))  # before any check can raise
    request.state.session = session  # for `abandon`, as `get_session` does
    await autocommitting(session)
    namespace = request.path_params.get("namespace")
    org: OrgOfPath | None = None
    # the caller and that org's policy in one statement; the path's check runs only after
    # this dependency, and a name it refuses (a NUL) must not reach the database first
    if isinstance(namespace, str) and a_namespace(namespace):
        principal, org = await get_principal_in(session, TOKENS.of(state), credentials, namespace)
    else:  # by the task's uid, in bulk (the namespaces are known later), or no namespace
        principal = await get_principal(session, TOKENS.of(state), credentials)
    principal = await holding(request, principal, sessions, DECIDE)
    kube = await get_kube(KUBE.of(state))
    return Deciding(session, principal, kube, DECIDER.of(state), org)


def ending(request: Request) -> AsyncExitStack:
    """What FastAPI exits once the route's answer is built, before it is sent (a yield
    dependency's `scope="function"`), with the route's error if it failed: the dependency's
    own checks, the body's validation, the handler."""
    stack = request.scope.get(_FUNCTION_STACK)
    if not isinstance(stack, AsyncExitStack):
        raise RuntimeError(f"no {_FUNCTION_STACK} in the request's scope (FastAPI changed?)")
    return stack


_FUNCTION_STACK = "fastapi_function_astack"


def _ender(session: AsyncSession) -> Callable[..., Awaitable[bool]]:
    """`get_session`'s end, as an exit callback: commit when the route succeeded, roll back
    when it failed, close the session (its connection back to the pool) either way. Shielded
    from cancellation, as FastAPI shields a yield dependency's end, when it has I/O to do:
    a session that autocommits (PostgreSQL) has no transaction left to end, so its end
    sends nothing and cannot be cut short."""

    async def end(exc_type: type[BaseException] | None, *_: object) -> bool:
        driver = autocommit_driver(session)
        if driver is not None and not driver.is_in_transaction():
            await _end(session, exc_type is None)
        else:
            with CancelScope(shield=True):
                await _end(session, exc_type is None)
        return False  # the route's error, if any, goes on

    return end


async def _end(session: AsyncSession, succeeded: bool) -> None:
    try:
        if succeeded:
            await session.commit()
        else:
            await session.rollback()
    finally:
        await session.close()


Decide = Annotated[Deciding, Depends(mark(deciding, [DECIDE]))]
"""A decision route's session, caller (holding `run.control`), Kubernetes client and
decision service, in one dependency."""
