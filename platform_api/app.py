"""The FastAPI application factory: `create_app(settings)`.

Building the app has no side effects; its lifespan connects to the database, runs the
migrations, builds each shared object once in dependency order (the composition root,
`_compose`) and puts it in its slot on `app.state`, where the routes receive it
(`platform_api.slots`), creates the first admin and applies the access map override, and
connects to the Kubernetes API when one is configured (and starts the watch that feeds
the review queue).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass

import httpx
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker
from starlette.datastructures import State

from humanwork_core import heap
from platform_api.access_map.repository import AccessMapRepository
from platform_api.access_map.router import router as access_map_router
from platform_api.access_map.service import check_platform
from platform_api.agent_api.proxy import ORG_MCP, TOOLS, ToolProxy
from platform_api.agent_api.rotations import ROTATIONS, TokenRotations
from platform_api.agent_api.router import events_router as agent_events_router
from platform_api.agent_api.router import router as agent_api_router
from platform_api.agent_mcp.router import router as agent_mcp_router
from platform_api.agents.commands import COMMANDS, AgentCommands
from platform_api.agents.manage_router import router as managed_agents_router
from platform_api.agents.planning import PLANNER, Planner
from platform_api.agents.router import router as agents_router
from platform_api.audit.router import router as audit_router
from platform_api.auth.router import router as auth_router
from platform_api.auth.signin import LOGINS, SignIn
from platform_api.auth.tokens import TOKENS, TokenService
from platform_api.confirmations import service as confirmations_service
from platform_api.confirmations.router import router as confirmations_router
from platform_api.conversations.router import router as conversations_router
from platform_api.corrections import service as corrections_service
from platform_api.corrections.router import router as corrections_router
from platform_api.corrections.service import CorrectionPusher
from platform_api.db import ENGINE, SESSIONS, make_engine, make_sessionmaker, migrate
from platform_api.deactivation.guard import guard_routes
from platform_api.deactivation.router import router as deactivation_router
from platform_api.dispatch.agents import KubeAgents
from platform_api.dispatch.loop import Dispatcher
from platform_api.errors import install_error_handlers
from platform_api.floor.audit.service import record
from platform_api.health.router import router as health_router
from platform_api.human_tasks.index import DECISIONS, DecisionIndex
from platform_api.human_tasks.router import router as human_tasks_router
from platform_api.integrations.crypto import CIPHER, CredentialCipher
from platform_api.integrations.router import router as integrations_router
from platform_api.knowledge.router import router as knowledge_router
from platform_api.kube.client import KubeClient
from platform_api.kube.namespaces import KubeOrgNamespaces
from platform_api.kube.published import AGENT_KEYS, CALLBACK_KEYS, AgentKeys, CallbackKey
from platform_api.mcp_servers.proxy import McpProxy
from platform_api.mcp_servers.router import router as mcp_servers_router
from platform_api.metrics import PlatformMetrics, RequestMetrics
from platform_api.notify.delivery import Deliverer
from platform_api.notify.router import events_router as notify_events_router
from platform_api.notify.router import router as webhooks_router
from platform_api.notify.watch import TaskNotifier
from platform_api.openapi import declare_capabilities
from platform_api.orgs.namespaces import NAMESPACES, NoopOrgNamespaces, OrgNamespaces
from platform_api.orgs.router import router as orgs_router
from platform_api.replies.router import router as replies_router
from platform_api.revisions.service import Reviser
from platform_api.routing.router import router as routing_router
from platform_api.settings import Settings
from platform_api.state import AGENT_HTTP, KUBE, METRICS, SETTINGS
from platform_api.tasks.automation import TaskAutomation
from platform_api.tasks.cancel import router as task_cancel_router
from platform_api.tasks.decisions import DECIDER, DecisionService
from platform_api.tasks.orgs import ORG_DIRECTORY
from platform_api.tasks.router import router as tasks_router
from platform_api.tools.catalog_router import router as catalog_router
from platform_api.tools.receipts import RECEIPTS, ReceiptSigner
from platform_api.tools.receipts_router import router as receipts_router
from platform_api.tools.router import router as tools_router
from platform_api.tools.upstreams.egress import (
    EGRESS,
    Egress,
    EgressClient,
    EgressPolicy,
    Resolver,
)
from platform_api.tools.upstreams.web import WebLimits
from platform_api.users.members_router import router as members_router
from platform_api.users.router import router as users_router
from platform_api.users.service import ensure_admin
from platform_api.web.router import router as web_router

DESCRIPTION = """
The humanwork platform API: where human experts decide what AI agents may do.

Authenticate with `POST /auth/token` (or a token of the configured OIDC issuer) and send
`Authorization: Bearer <token>`. Every endpoint names the capability it needs; roles map
to capabilities through the access map. Everything is scoped to the caller's orgs: another
org's resource answers 404. Every error has the body `{"code", "message", "details"}`.

Tasks live in Kubernetes (AgenticTask resources). The platform reaches the Kubernetes API
through `HUMANWORK_KUBECONFIG` (a kubeconfig file) or `HUMANWORK_KUBE_IN_CLUSTER=true`;
without either, `/agentic/tasks` and `/human-tasks` answer 503 `kubernetes_unavailable`
and everything else works. A task's id is `<namespace>/<name>`; a human task's id is
`<namespace>/<name>/<step id>`.
"""

TAGS = [
    {"name": "auth", "description": "Log in."},
    {"name": "receipts", "description": "Signed receipts of the tool proxy's calls."},
    {"name": "orgs", "description": "Client organisations."},
    {"name": "users", "description": "Users, roles and memberships."},
    {"name": "tasks", "description": "AgenticTasks: plans, and the experts' decisions."},
    {"name": "review queue", "description": "Every decision waiting on a human."},
    {"name": "tool permissions", "description": "Which tools an org's agents may use."},
    {"name": "integrations", "description": "Encrypted third-party credentials."},
    {"name": "mcp servers", "description": "An org's own MCP servers and their tools."},
    {"name": "audit", "description": "The hash-chained audit log."},
    {"name": "access map", "description": "Which role holds which capability."},
    {"name": "conversations", "description": "Conversations and messages of an org."},
    {"name": "knowledge", "description": "What an org's agents may search."},
    {"name": "agents", "description": "Signed commands to an org's agents."},
    {"name": "replies", "description": "Draft replies to conversations, sent or reviewed."},
    {"name": "corrections", "description": "What experts corrected, taught to the agents."},
    {"name": "agent api", "description": "Called by agents, with their agent token only."},
    {"name": "notifications", "description": "Webhooks and the live event stream."},
    {"name": "health", "description": "Liveness."},
]


async def _bootstrap(settings: Settings, sessions: async_sessionmaker[AsyncSession]) -> None:
    async with sessions() as session, session.begin():
        password = settings.admin_password.get_secret_value() if settings.admin_password else None
        await ensure_admin(session, password)
        if settings.access_map:
            access = AccessMapRepository(session)
            current = await access.roles()
            wanted = {role: sorted(set(caps)) for role, caps in settings.access_map.items()}
            check_platform(wanted)  # no role may hold a platform administrator's
            if any(current.get(role) != caps for role, caps in wanted.items()):
                for role, caps in wanted.items():
                    await access.replace(role, caps)
                await record(
                    session,
                    actor="system",
                    action="access_map.replaced",
                    target="access_map",
                    details={"roles": wanted},
                )


ROUTERS = (
    health_router,
    auth_router,
    orgs_router,
    users_router,
    members_router,
    catalog_router,
    tools_router,
    receipts_router,
    integrations_router,
    mcp_servers_router,
    audit_router,
    tasks_router,
    task_cancel_router,
    notify_events_router,  # notify: before human_tasks, /human-tasks/events
    webhooks_router,  # notify
    human_tasks_router,
    conversations_router,
    agent_api_router,
    agent_mcp_router,  # MCP for agents, on the agent API
    agent_events_router,
    knowledge_router,
    agents_router,
    # draft replies and corrections
    replies_router,
    corrections_router,
    routing_router,  # POST /orgs/{org_id}/tasks
    web_router,
    # orgs and their agents managed through the platform
    managed_agents_router,
    deactivation_router,
    access_map_router,
    confirmations_router,  # the client's confirmation of high-stakes steps
)


def _org_namespaces(namespaces: OrgNamespaces | None, kube: KubeClient | None) -> OrgNamespaces:
    if namespaces is not None:
        return namespaces
    return KubeOrgNamespaces(kube) if kube is not None else NoopOrgNamespaces()


@dataclass(frozen=True)
class _Floor:
    """What the composition root built that the lifespan starts and stops (every route
    reaches its part through its own slot)."""

    settings: Settings
    sessions: async_sessionmaker[AsyncSession]
    kube: KubeClient | None
    decisions: DecisionIndex | None
    cipher: CredentialCipher | None
    egress: Egress
    metrics: PlatformMetrics
    logins: SignIn
    commands: AgentCommands
    http: httpx.AsyncClient
    """The platform's client for its agents."""
    upstreams: httpx.AsyncClient
    """The tool proxy's client for upstream APIs."""


def _services(
    state: State,
    settings: Settings,
    sessions: async_sessionmaker[AsyncSession],
    kube: KubeClient | None,
    decisions: DecisionIndex | None,
    egress: Egress,
    metrics: PlatformMetrics,
    cipher: CredentialCipher | None,
    callback_key: CallbackKey,
) -> tuple[AgentCommands, httpx.AsyncClient, httpx.AsyncClient]:
    """The services over the floor, in dependency order, each put in its slot; the
    agents' command client and the two HTTP clients."""
    http = httpx.AsyncClient(timeout=settings.agent_timeout_seconds)
    upstreams = EgressClient(egress, timeout=settings.upstream_timeout_seconds)
    commands = AgentCommands(settings, kube, callback_key, http)
    pusher = CorrectionPusher(sessions, kube, commands)  # a step's corrections reach the agents
    DECIDER.put(
        state,
        DecisionService(
            sessions,
            settings.decision_retries,
            decisions,
            pusher,
            on_decided=lambda verdict: metrics.decisions.labels(verdict).inc(),
        ),
    )
    receipts = (
        ReceiptSigner.load(settings.receipt_key_file, settings.receipt_verify_keys_file)
        if settings.receipt_key_file is not None
        else None
    )
    RECEIPTS.put(state, receipts)
    tools = ToolProxy(
        sessions,
        kube,
        cipher,
        upstreams,
        web=WebLimits(settings.web_fetch_max_bytes, settings.web_fetch_timeout_seconds),
        claim_lease_seconds=settings.tool_claim_lease_seconds,
        on_called=lambda tool, outcome: metrics.proxy_calls.labels(tool, outcome).inc(),
        receipts=receipts,
    )
    TOOLS.put(state, tools)
    ORG_MCP.put(state, McpProxy(tools, egress, settings.upstream_timeout_seconds).call_step_tool)
    COMMANDS.put(state, commands)
    AGENT_HTTP.put(state, http)
    PLANNER.put(
        state,
        Planner(
            sessions,
            kube,
            commands,
            corrections_of=corrections_service.chat_payload,
            confirmations_of=confirmations_service.require_quietly,
        ),
    )
    return commands, http, upstreams


def _compose(
    state: State,
    settings: Settings,
    engine: AsyncEngine,
    kube: KubeClient | None,
    namespaces: OrgNamespaces,
    egress: Egress,
) -> _Floor:
    """The composition root: every shared object built once, in dependency order, and
    put in its slot (`platform_api.slots`), where the routes receive it."""
    sessions = make_sessionmaker(engine)
    decisions = DecisionIndex() if kube is not None else None
    cipher = CredentialCipher.from_settings(settings)
    metrics = PlatformMetrics(queue_source=decisions.summary if decisions is not None else None)
    logins = SignIn.from_settings(settings)
    callback_key = CallbackKey()
    SETTINGS.put(state, settings)
    ENGINE.put(state, engine)
    SESSIONS.put(state, sessions)
    KUBE.put(state, kube)
    METRICS.put(state, metrics)
    TOKENS.put(state, TokenService(settings))
    LOGINS.put(state, logins)
    NAMESPACES.put(state, namespaces)
    CIPHER.put(state, cipher)
    EGRESS.put(state, egress)
    AGENT_KEYS.put(state, AgentKeys())
    CALLBACK_KEYS.put(state, callback_key)
    ROTATIONS.put(state, TokenRotations())
    DECISIONS.put(state, decisions)
    ORG_DIRECTORY.put(state, decisions.orgs if decisions is not None else None)
    commands, http, upstreams = _services(
        state, settings, sessions, kube, decisions, egress, metrics, cipher, callback_key
    )
    return _Floor(
        settings,
        sessions,
        kube,
        decisions,
        cipher,
        egress,
        metrics,
        logins,
        commands,
        http,
        upstreams,
    )


def _start_watch(floor: _Floor) -> list[asyncio.Task[None]]:
    """Auto-approval and archiving, fed by the watch (subscribed before it lists); the
    background tasks, in the order to stop them."""
    kube, decisions = floor.kube, floor.decisions
    if kube is None or decisions is None:
        return []
    automation = TaskAutomation(kube, floor.sessions, decisions.orgs)
    decisions.subscribe(automation.observe, automation.forget)
    automator = asyncio.create_task(automation.run(), name="automation")
    watcher = asyncio.create_task(decisions.run(kube), name="decision-watch")
    return [watcher, automator]


def _start_notifier(floor: _Floor) -> tuple[list[asyncio.Task[None]], httpx.AsyncClient]:
    """notify: the events of the watched tasks, the near-deadline
    check and the webhook deliveries (through an egress client of their own)."""
    settings, metrics = floor.settings, floor.metrics
    client = EgressClient(floor.egress, timeout=settings.webhook_timeout_seconds)
    deliverer = Deliverer(
        floor.sessions,
        client,
        floor.cipher,
        settings.webhook_max_attempts,
        settings.webhook_backoff_seconds,
        settings.webhook_timeout_seconds,
        on_attempt=lambda outcome: metrics.webhook_deliveries.labels(outcome).inc(),
    )
    reviser = Reviser(settings, floor.sessions, floor.kube, floor.commands)  # the revision loop
    # the notifier reads a task due near its deadline from the index
    tasks = floor.decisions.task if floor.decisions is not None else None
    notifier = TaskNotifier(floor.sessions, settings, deliverer, reviser, tasks)
    if floor.decisions is not None:
        floor.decisions.subscribe(notifier.observe, notifier.forget)
    return [asyncio.create_task(notifier.run(), name="notifier")], client


def _start_dispatcher(app: FastAPI, floor: _Floor) -> asyncio.Task[None]:
    """The dispatch of clients' messages (`platform_api.dispatch`), on every replica;
    `app.state.dispatcher` holds it."""
    agents = KubeAgents(
        floor.settings,
        floor.kube,
        floor.sessions,
        floor.commands,
        floor.http,
        confirmations_service.require_quietly,
    )
    dispatcher = Dispatcher(floor.sessions, floor.settings, agents)
    app.state.dispatcher = dispatcher
    return asyncio.create_task(dispatcher.run(), name="dispatcher")


log = logging.getLogger(__name__)

SHUTDOWN_SECONDS = 10
"""How long the app waits for its background tasks to stop."""


async def _shutdown(
    tasks: list[asyncio.Task[None]],
    kube: KubeClient | None,
    engine: AsyncEngine,
    floor: _Floor | None,
) -> None:
    # cancel every background task first, then wait for them a bounded time: one that
    # does not stop (or fails as it stops) must neither keep the others running nor hang
    # the shutdown
    for task in tasks:
        task.cancel()
    if tasks:
        done, pending = await asyncio.wait(tasks, timeout=SHUTDOWN_SECONDS)
        for task in pending:
            log.warning(
                "background task %s did not stop within %ss", task.get_name(), SHUTDOWN_SECONDS
            )
        for task in done:
            if not task.cancelled() and task.exception() is not None:
                log.warning("background task %s failed: %r", task.get_name(), task.exception())
    if kube is not None:
        await kube.close()
    if floor is not None:
        await asyncio.to_thread(floor.metrics.close)
        floor.logins.close()
        for client in (floor.http, floor.upstreams):
            await client.aclose()
    await engine.dispose()


def _lifespan(
    settings: Settings, namespaces: OrgNamespaces | None, egress: Egress
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine = make_engine(
            settings.database_url,
            pool_size=settings.database_pool_size,
            pool_overflow=settings.database_pool_overflow,
        )
        kube: KubeClient | None = None
        floor: _Floor | None = None
        tasks: list[asyncio.Task[None]] = []
        webhooks: httpx.AsyncClient | None = None  # notify
        try:
            kube = await KubeClient.from_settings(settings)
            org_namespaces = _org_namespaces(namespaces, kube)
            if settings.migrate_on_startup:
                await migrate(engine)
            floor = _compose(app.state, settings, engine, kube, org_namespaces, egress)
            await _bootstrap(settings, floor.sessions)
            notifier, webhooks = _start_notifier(floor)  # notify: subscribed before the watch
            tasks = [*_start_watch(floor), *notifier, _start_dispatcher(app, floor)]
            trimmer = heap.trim_every(settings.heap_trim_seconds)
            tasks.append(asyncio.create_task(trimmer, name="heap-trim"))
            if settings.metrics_port:
                floor.metrics.serve(settings.metrics_port, settings.metrics_address)
            yield
        finally:
            await _shutdown(tasks, kube, engine, floor)
            if webhooks is not None:  # notify
                await webhooks.aclose()

    return lifespan


def _metrics_of(app: FastAPI) -> PlatformMetrics | None:
    metrics = getattr(app.state, METRICS.name, None)
    return metrics if isinstance(metrics, PlatformMetrics) else None


def create_app(
    settings: Settings,
    *,
    namespaces: OrgNamespaces | None = None,
    resolver: Resolver | None = None,
) -> FastAPI:
    """The platform API for `settings`; `namespaces` defaults to `KubeOrgNamespaces` when
    Kubernetes is configured, `NoopOrgNamespaces` otherwise; `resolver` (host, port ->
    addresses) to the system resolver (tests give their own, never the real network)."""
    egress = Egress(EgressPolicy.parse(settings.upstream_allowed_endpoints))
    if resolver is not None:
        egress = Egress(egress.policy, resolver)
    app = FastAPI(
        title="humanwork platform API",
        version="0.1.0",
        description=DESCRIPTION,
        openapi_tags=TAGS,
        lifespan=_lifespan(settings, namespaces, egress),
    )
    install_error_handlers(app)
    app.add_middleware(RequestMetrics, metrics=lambda: _metrics_of(app))
    for router in ROUTERS:
        guard_routes(router.routes)  # a deactivated org takes no new work
        app.include_router(router)
    declare_capabilities(app.router)
    return app
