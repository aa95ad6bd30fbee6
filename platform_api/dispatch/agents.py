"""How the dispatcher reaches an org's agent: `AgentPort` (pick the agent, send it a
signed command, bind a requester to the task it filed), and `KubeAgents`, the real one
over the platform's routing (`platform_api.routing`), its signed commands
(`platform_api.agents.commands`) and the requester binding of `agents.planning` (with
the steps the client must confirm). The
dispatcher holds the port, so the same dispatch runs against the real agents and, in the
tests, against an agent whose answers (and failures) the test decides."""

from __future__ import annotations

from typing import Any, Protocol

import httpx
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from platform_api.agents.commands import AgentCommands, AgentTarget, org_agent, require_kube
from platform_api.agents.planning import ConfirmationsOf, bind_requester
from platform_api.kube.client import KubeClient
from platform_api.models import Org
from platform_api.routing.llm import LlmRouter
from platform_api.routing.service import choose, org_candidates
from platform_api.settings import Settings


class AgentPort(Protocol):
    """What the dispatcher asks of an org's agents."""

    async def target(self, session: AsyncSession, org: Org, request: str) -> AgentTarget:
        """The org's agent for `request` (the routing's refusal when none fits)."""
        ...

    async def send(
        self,
        target: AgentTarget,
        path: str,
        payload: dict[str, Any],
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """The agent's answer to the signed command (AgentUnreachable / AgentRefused)."""
        ...

    async def bind(self, target: AgentTarget, task: str, request_id: str, requester: str) -> bool:
        """Write `requester` on the task the agent filed for plan request `request_id`."""
        ...


class KubeAgents:
    """The org's agents as the platform reaches them."""

    def __init__(
        self,
        settings: Settings,
        kube: KubeClient | None,
        sessions: async_sessionmaker[AsyncSession],
        commands: AgentCommands,
        http: httpx.AsyncClient | None,
        confirmations_of: ConfirmationsOf | None,
    ) -> None:
        self._settings, self._kube, self._sessions = settings, kube, sessions
        self._commands, self._http, self._confirmations_of = commands, http, confirmations_of

    async def target(self, session: AsyncSession, org: Org, request: str) -> AgentTarget:
        kube = require_kube(self._kube, "dispatching a client message")
        settings, http = self._settings, self._http
        llm = LlmRouter(settings, http) if settings.router_llm_base_url and http else None
        choice = await choose(request, await org_candidates(kube, org), llm)
        return await org_agent(session, kube, org.id, choice.agent)

    async def send(
        self,
        target: AgentTarget,
        path: str,
        payload: dict[str, Any],
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        return await self._commands.send(target, path, payload, idempotency_key)

    async def bind(self, target: AgentTarget, task: str, request_id: str, requester: str) -> bool:
        """Bind the client, then record the steps it must confirm (as a plan request
        through `agents.planning` does); the proxy refuses them unconfirmed either way."""
        kube = require_kube(self._kube, "binding a requester")
        bound = await bind_requester(
            kube, target.org.namespace, task, target.name, request_id, requester
        )
        confirmations = self._confirmations_of
        if bound and confirmations is not None:
            async with self._sessions() as session, session.begin():
                await confirmations(session, kube, target.org.id, target.org.namespace, task)
        return bound
