"""Agent-facing endpoints, authenticated by the agent token only (prefix `/v1/agent-api`):
who the caller is, an early token rotation, conversation history, knowledge search and
the tool proxy; and `POST /v1/agent-events`, authenticated by the HMAC signature."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Header, Path, Query, Request, Response

from humanwork_core import keys, tracing
from humanwork_core.signing import SIGNATURE_HEADER
from platform_api.agent_api import context, events
from platform_api.agent_api.auth import CurrentAgent
from platform_api.agent_api.proxy import OrgMcp, Tools
from platform_api.agent_api.schemas import (
    AgentIdentity,
    RotationRequested,
    ToolCallIn,
    ToolCallOut,
)
from platform_api.db import Session, Sessions
from platform_api.errors import KubernetesUnavailable, error_responses
from platform_api.kube.published import CallbackKeyDep
from platform_api.openapi import AGENT_SIGNATURE, EXTENSION, body_schema
from platform_api.state import MaybeKube

router = APIRouter(prefix="/v1/agent-api", tags=["agent api"])
events_router = APIRouter(tags=["agent api"])
ROTATE_ANNOTATION = keys.ROTATE_TOKEN


MAX_SIGNATURE_LENGTH = 1024
"""Far more than `t=<unix seconds>,v1=<64 hex>` needs; a longer header answers 422."""

UNAVAILABLE = {503: ("kubernetes_unavailable", "no Kubernetes API is configured")}
AGENT_ERRORS = error_responses(401, 422, 503, codes=UNAVAILABLE)


@router.get(
    "/whoami",
    summary="The authenticated agent",
    description="Agent token only. 401 `unauthenticated` (details.reason: the token error, "
    "e.g. token_expired, token_revoked) for any token that is not the agent's current one.",
    responses=AGENT_ERRORS,
)
async def whoami(agent: CurrentAgent) -> AgentIdentity:
    """The agent the token stands for: its id, org and scopes."""
    return AgentIdentity(
        agentId=agent.agent_id,
        orgId=agent.org_id,
        namespace=agent.namespace,
        scopes=sorted(agent.scopes),
    )


@router.post(
    "/token/refresh",
    status_code=202,
    summary="Ask for a new token now",
    description="Agent token only. The operator rotates the token at once; the current "
    "one stays valid for its grace period.",
    responses=AGENT_ERRORS,
)
async def refresh_token(agent: CurrentAgent, kube: MaybeKube) -> RotationRequested:
    """Asks the operator to rotate this agent's token at once (it annotates the
    AgentInstance with `humanwork.io/rotate-token`); the new token reaches the agent
    through its mounted Secret, and the current one stays valid for its grace period."""
    if kube is None:
        raise KubernetesUnavailable("the agent API needs the Kubernetes API")
    requested = datetime.now(UTC).isoformat()
    await kube.annotate_agent_instance(agent.namespace, agent.name, {ROTATE_ANNOTATION: requested})
    return RotationRequested(agentId=agent.agent_id, rotationRequestedAt=requested)


@router.get(
    "/conversations/{conversation_id}/messages",
    summary="A conversation's messages",
    description="Agent token with `conversations:read`. Only the agent's org's "
    "conversations; any other id answers 404.",
    responses=error_responses(401, 403, 404, 422, 503, codes=UNAVAILABLE),
)
async def conversation_messages(
    agent: CurrentAgent, session: Session, conversation_id: uuid.UUID
) -> context.ConversationMessages:
    """The conversation's messages, oldest first."""
    return await context.messages(session, agent, conversation_id)


@router.get(
    "/context",
    summary="Search the org's knowledge documents",
    description="Agent token with `context:read`. A ranked full-text search over the "
    "documents of the agent's org only (title words count double).",
    responses=error_responses(401, 403, 422, 503, codes=UNAVAILABLE),
)
async def knowledge_context(
    agent: CurrentAgent,
    session: Session,
    query: Annotated[str, Query(min_length=1, max_length=500, examples=["refund policy"])],
    limit: Annotated[int, Query(ge=1, le=50)] = 5,
) -> context.ContextResult:
    """The best-matching documents, best first, with a snippet each."""
    return await context.search(session, agent, query, limit)


TOOL_CODES = {
    403: ("step_not_approved", "the step has no approving decision"),
    404: ("unknown_tool", "no such tool"),
    409: ("tool_call_in_progress", "a call with this key is running"),
    422: ("unknown_action", "shopify has no action 'dropTables'"),
    502: ("upstream_error", "the upstream refused the call"),
    503: ("kubernetes_unavailable", "no Kubernetes API is configured"),
}

ORG_MCP_PREFIX = "mcp_"
"""The prefix of the step tools of an org's own MCP servers."""


@router.post(
    "/tools/{tool}",
    summary="Run a tool through the proxy",
    description="Agent token with `tools:execute`. The tool must be enabled for the org "
    "(`PUT /orgs/{orgId}/tool-permissions/{tool}`) and listed in the AgentInstance's "
    "`spec.enabledTools`. A side-effecting action runs only for the named task's step "
    "whose decision approves exactly this tool, action and params (403 "
    "`step_not_approved` otherwise, with `details.reason`), and needs an `idempotencyKey`: "
    "a repeated key returns the first result (`replayed: true`) without calling the "
    "upstream again; the same key with another request answers 422 "
    "`idempotency_conflict`. The org's credentials are decrypted here and never returned; "
    "every call is audited as `tool.called`. A tool `mcp_<server>` is one of the org's own "
    "MCP servers' (`action`: the server's tool): it runs only as an approved step pinning "
    "the tool's definition (docs/api.md, \"An org's MCP servers\").",
    responses=error_responses(401, 403, 404, 409, 422, 502, 503, codes=TOOL_CODES),
)
async def call_tool(
    agent: CurrentAgent,
    tools: Tools,
    org_mcp: OrgMcp,
    body: ToolCallIn,
    tool: Annotated[str, Path(pattern=r"^[a-z][a-z0-9_]{0,62}$", examples=["shopify"])],
    request: Request,
    response: Response,
) -> ToolCallOut:
    """The tool's sanitised result (a span `humanwork.tool_proxy` in the caller's trace)."""
    attributes = {
        "gen_ai.tool.name": tool,
        "gen_ai.tool.call.id": body.idempotencyKey or "",
        "humanwork.tool.action": body.action,
        "humanwork.agent": agent.agent_id,
        "humanwork.task": body.task or "",
        "humanwork.step.id": body.step or "",
    }
    parent = tracing.context_from_headers(request.headers)
    with tracing.span("humanwork.tool_proxy", attributes, parent=parent, kind="server"):
        if tool.startswith(ORG_MCP_PREFIX) and org_mcp is not None:
            out = await org_mcp(agent, tool, body)
        else:
            out = await tools.call(agent, tool, body)
    if out.replayed:
        response.headers["Idempotent-Replayed"] = "true"
    return out


EVENT_CODES = {
    401: ("signature_refused", "the signature was refused"),
    413: ("payload_too_large", "the event is over 262144 bytes"),
    503: ("kubernetes_unavailable", "no Kubernetes API is configured"),
}


@events_router.post(
    "/v1/agent-events",
    summary="Receive a signed agent event",
    description="Authenticated by the HMAC-SHA256 signature only: header "
    f"`{SIGNATURE_HEADER}: t=<unix seconds>,v1=<hex>` over `<t>.<raw body>` with the "
    "AgentInstance's callback secret; more than five minutes off answers 401 "
    "`signature_refused` (details.reason `signature_expired`). The body is the seed's "
    "event envelope (see the example). Deduplicated by `(org, idempotency_key)`: a "
    "repeat answers `duplicate: true` and is not audited again. `config.applied` with "
    "`payload.configHash` records the applied configuration on the AgentInstance. A body "
    "over 262144 bytes answers 413 `payload_too_large` before it is parsed or stored.",
    responses=error_responses(401, 413, 422, 503, codes=EVENT_CODES),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": body_schema(events.AgentEventIn)}},
        },
        EXTENSION: [AGENT_SIGNATURE],
    },
)
async def agent_event(
    request: Request,
    sessions: Sessions,
    kube: MaybeKube,
    callback_key: CallbackKeyDep,
    signature: Annotated[
        str | None, Header(alias=SIGNATURE_HEADER, max_length=MAX_SIGNATURE_LENGTH)
    ] = None,
) -> events.EventAccepted:
    """Verify, store once and audit the event."""
    body = await events.read_bounded(request.headers, request.stream())
    parent = tracing.context_from_headers(request.headers)
    with tracing.span("humanwork.agent_event", parent=parent, kind="server"):
        return await events.receive(sessions, kube, callback_key, body, signature)
