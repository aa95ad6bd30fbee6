"""The running service's shared objects (engine, session factory, token service, org
namespace seam, credential cipher, Kubernetes client, decision index and decision
service, the agent-facing caches), built by the app's lifespan and
reached through `Annotated` dependencies rather than module globals."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

import httpx
from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from platform_api.agent_api.rotations import TokenRotations
from platform_api.auth.signin import SignIn
from platform_api.auth.tokens import TokenService
from platform_api.errors import KubernetesUnavailable
from platform_api.human_tasks.index import DecisionIndex
from platform_api.integrations.crypto import CredentialCipher
from platform_api.kube.client import KubeClient
from platform_api.kube.published import AgentKeys, CallbackKey
from platform_api.metrics import PlatformMetrics
from platform_api.orgs.namespaces import OrgNamespaces
from platform_api.settings import Settings
from platform_api.tools.upstreams.egress import Egress

if TYPE_CHECKING:
    from platform_api.agent_api.identity import Agent
    from platform_api.agent_api.proxy import ToolProxy
    from platform_api.agent_api.schemas import ToolCallIn, ToolCallOut
    from platform_api.tasks.decisions import DecisionService


CorrectionsOf = Callable[[AsyncSession, uuid.UUID], Awaitable[list[dict[str, Any]]]]
"""The org's corrections for an agent command (session, org id) -> payload."""

ConfirmationsOf = Callable[[AsyncSession, KubeClient, uuid.UUID, str, str], Awaitable[bool]]
"""Records the client confirmations a task needs (session, kube, org id, namespace, task
name) -> written; `confirmations.service.require_quietly`, wired by the app."""

OrgToolCall = Callable[["Agent", str, "ToolCallIn"], Awaitable["ToolCallOut"]]
"""Runs an agent's call of a tool of one of its org's MCP servers (agent, step tool
`mcp_<server>`, body) -> result; `mcp_servers.proxy.McpProxy.call_step_tool`."""


@dataclass
class Platform:
    """Everything a request handler may need besides its session."""

    settings: Settings
    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    tokens: TokenService
    namespaces: OrgNamespaces
    cipher: CredentialCipher | None
    decider: DecisionService
    """The decision service (built once, with the sessions, retries and decision index)."""
    tools: ToolProxy
    """The tool proxy (built once, with the sessions, cipher, clients and its ledger)."""
    logins: SignIn
    """The sign-in's failure throttle (in the database, shared by every replica),
    password threads and trusted proxies."""
    metrics: PlatformMetrics
    """This app's Prometheus metrics."""
    kube: KubeClient | None = None
    decisions: DecisionIndex | None = None
    http: httpx.AsyncClient | None = None
    """The platform's client for its agents (signed commands)."""
    upstreams: httpx.AsyncClient | None = None
    """The tool proxy's client for upstream APIs (Shopify, Amazon, ...): an
    `EgressClient`, refusing internal addresses at connect time."""
    egress: Egress = field(default_factory=Egress)
    """Where integrations may point (checked when credentials are stored)."""
    agent_keys: AgentKeys = field(default_factory=AgentKeys)
    """The operator's published token verification keys, cached briefly."""
    callback_key: CallbackKey = field(default_factory=CallbackKey)
    """The installation's callback master key, cached briefly."""
    rotations: TokenRotations = field(default_factory=TokenRotations)
    """The agent tokens audited as `agent.token_rotated` (agent_api.rotations)."""
    org_corrections: CorrectionsOf | None = None
    """The org's newest corrections as a command carries them (`corrections.service.
    chat_payload`, wired by the app): a plan command carries them too."""
    org_mcp: OrgToolCall | None = None
    """Calls of the org's own MCP servers' tools through `POST /v1/agent-api/tools/mcp_<server>`
    (`mcp_servers.proxy.McpProxy.call_step_tool`, wired by the app)."""
    require_confirmations: ConfirmationsOf | None = None
    """Called once the platform bound a task's requester: records which of its steps the
    initiating client must confirm (`confirmations.service.require_quietly`)."""


def platform_of(request: Request) -> Platform:
    """The `Platform` of the app serving this request."""
    platform: Platform = request.app.state.platform
    return platform


async def get_platform(request: Request) -> Platform:
    """`platform_of` as a dependency (a coroutine: FastAPI runs a plain function
    dependency in a worker thread, a hop on every request)."""
    return platform_of(request)


PlatformDep = Annotated[Platform, Depends(get_platform)]


async def get_kube(platform: PlatformDep) -> KubeClient:
    """The platform's Kubernetes client; 503 `kubernetes_unavailable` when there is none."""
    if platform.kube is None:
        raise KubernetesUnavailable(
            "no Kubernetes API is configured (HUMANWORK_KUBECONFIG or HUMANWORK_KUBE_IN_CLUSTER)"
        )
    return platform.kube


Kube = Annotated[KubeClient, Depends(get_kube)]
