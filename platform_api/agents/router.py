"""`POST /orgs/{org_id}/agents/{name}/tasks` (capability `run.control`): ask an org's agent
to plan a request. The plan comes back as an AgenticTask waiting in the review queue.

The platform signs the command like every platform -> agent command: HMAC-SHA256 over the
timestamp and the body with the instance's callback secret (derived from the master key,
`humanwork_core.signing.derive_secret`), so an agent obeys only the platform. The agent is
reached at its AgentInstance's `status.endpoint` (its Service) unless
`HUMANWORK_AGENT_ENDPOINTS` (or the file `HUMANWORK_AGENT_ENDPOINTS_FILE`) names another
URL for it (agents run as local processes in development).

The requester is the caller, vouched for by the platform, never by the agent (issue 12,
item 3): the command carries a plan request id (`humanwork_core.requester.plan_request_id`),
the agent puts it on the task it creates (whose `spec.requestedBy` admission pins to
`agent:<name>`), and when the agent answers with that task the platform writes the caller
into the task's annotation `humanwork.io/requester`, which only the platform API may write.
The caller therefore cannot approve the plan's steps; an agent that names another task, or
none, leaves the task requested by `agent:<name>`. Audited as `task.plan_requested`, with
`requesterBound`.

`POST /orgs/{org_id}/agents/{name}/token/revoke` (capability `agents.manage`): revoke the
agent's platform token at once without deleting its AgentInstance (issue 12, item 10). The
platform sets the annotation `humanwork.io/revoke-token`; while it is present the platform
refuses every token of that agent, and the operator revokes the current jti (and any
previous one still in its grace), mints a new token with no grace for the old ones and
removes the annotation. Audited as `agent.token_revoked`.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any

import httpx
from fastapi import APIRouter, Header, Path
from pydantic import BaseModel, ConfigDict, Field

from humanwork_core import keys, signing
from humanwork_core.requester import REQUESTER_ANNOTATION, may_bind, plan_request_id
from humanwork_core.resources import AgenticTask
from platform_api.access.principal import OrgScope
from platform_api.audit.service import record
from platform_api.auth.dependencies import require_in_org
from platform_api.db import Session
from platform_api.errors import (
    AgentRefused,
    AgentUnreachable,
    KubernetesUnavailable,
    NotFound,
    error_responses,
)
from platform_api.kube.client import KubeClient, KubeError, KubeNotFound
from platform_api.models import Org
from platform_api.settings import Settings
from platform_api.state import Platform, PlatformDep

router = APIRouter(prefix="/orgs/{org_id}/agents", tags=["agents"])


class PlanRequest(BaseModel):
    """What to ask the agent."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "request": "Reconcile all Amazon orders for October and update "
                    "inventory in Shopify for any discrepancies"
                }
            ]
        },
    )

    request: str = Field(min_length=1, max_length=4096)
    conversationId: uuid.UUID | None = None
    policy: dict[str, Any] | None = Field(
        default=None, description="the task's approval policy (AgenticTask spec.policy)"
    )


REVOKE_TOKEN_ANNOTATION = keys.REVOKE_TOKEN
"""The same annotation the operator acts on (`agent_operator.builders`)."""


class RevokedToken(BaseModel):
    """A revocation the operator is carrying out."""

    agent: str = Field(description="`<namespace>/<name>`")
    revokedJti: str | None = Field(description="the token id current when it was revoked")
    requestedAt: datetime


class PlannedTask(BaseModel):
    """The task the agent created."""

    id: str = Field(description="`<namespace>/<name>`, the task's id in /agentic/tasks")
    created: bool = Field(description="false when the Idempotency-Key named an earlier plan")
    planner: str | None = None
    summary: str = ""
    steps: list[dict[str, Any]]


def _override(settings: Settings, agent_id: str) -> str | None:
    """The development override of an agent's URL, if any."""
    if agent_id in settings.agent_endpoints:
        return settings.agent_endpoints[agent_id]
    if settings.agent_endpoints_file is not None:
        try:
            mapping = json.loads(settings.agent_endpoints_file.read_text())
        except (OSError, ValueError):
            return None
        found = mapping.get(agent_id) if isinstance(mapping, dict) else None
        return str(found) if found else None
    return None


@router.post(
    "/{name}/tasks",
    status_code=201,
    summary="Ask an agent to plan a request",
    description="Capability `run.control`, in one of the caller's orgs (404 otherwise, and "
    "for an agent the org does not have). The platform sends the agent a signed command; "
    "the agent creates the AgenticTask, whose steps then wait for experts. "
    "`Idempotency-Key` is passed on: a retry names the same task. 502 `agent_unreachable` "
    "when the agent cannot be reached, 502 `agent_refused` with the agent's error code in "
    "`details` when it refuses.",
    responses=error_responses(
        401,
        403,
        404,
        422,
        502,
        503,
        codes={502: ("agent_unreachable", "the agent did not answer")},
    ),
)
async def plan_task(
    body: PlanRequest,
    session: Session,
    platform: PlatformDep,
    scope: Annotated[OrgScope, require_in_org("run.control")],
    name: Annotated[str, Path(max_length=253, pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")],
    idempotency_key: Annotated[
        str | None, Header(alias="Idempotency-Key", min_length=1, max_length=128)
    ] = None,
) -> PlannedTask:
    kube = platform.kube
    if kube is None:
        raise KubernetesUnavailable("asking an agent needs the Kubernetes API")
    org, instance = await _org_agent(session, kube, scope.org_id, name)
    agent_id = f"{org.namespace}/{name}"
    endpoint = _override(platform.settings, agent_id) or str(
        (instance.get("status") or {}).get("endpoint") or ""
    )
    if not endpoint:
        raise AgentUnreachable("the agent has no endpoint yet", agent=agent_id)
    secret = await _callback_secret(platform, kube, org, name, instance)
    requester = scope.principal.username
    request_id = plan_request_id(str(org.id), name, requester, idempotency_key)
    raw = _plan_command(body, requester, request_id)
    headers = {
        "Content-Type": "application/json",
        signing.SIGNATURE_HEADER: signing.sign(secret, raw, datetime.now(UTC)),
    }
    if idempotency_key:
        headers[signing.IDEMPOTENCY_HEADER] = idempotency_key
    planned = await _send_plan(platform, f"{endpoint.rstrip('/')}/v1/tasks", raw, headers, agent_id)
    task_id = f"{org.namespace}/{planned.get('name')}"
    bound = await bind_requester(
        kube, org.namespace, str(planned.get("name") or ""), name, request_id, requester
    )
    await record(
        session,
        actor=scope.principal.username,
        action="task.plan_requested",
        target=f"task:{task_id}",
        org_id=org.id,
        details={
            "agent": agent_id,
            "created": bool(planned.get("created", True)),
            "requesterBound": bound,
        },
    )
    return PlannedTask(
        id=task_id,
        created=bool(planned.get("created", True)),
        planner=planned.get("planner"),
        summary=str(planned.get("summary") or ""),
        steps=list(planned.get("steps") or []),
    )


async def _callback_secret(
    platform: Platform, kube: KubeClient, org: Org, name: str, instance: dict[str, Any]
) -> str:
    """The agent's callback secret, derived from the installation's master key."""
    master = await platform.callback_key.get(kube)
    if master is None:
        raise AgentUnreachable(
            "no callback key: the operator has not run", agent=f"{org.namespace}/{name}"
        )
    return signing.derive_secret(
        master, org.namespace, name, str(instance["metadata"].get("uid", ""))
    )


def _plan_command(body: PlanRequest, requester: str, request_id: str) -> bytes:
    """The signed command's body: the request, who asks, and the plan request's id."""
    command: dict[str, Any] = {
        "request": body.request,
        "requester": requester,
        "planRequest": request_id,
    }
    if body.conversationId is not None:
        command["conversationId"] = str(body.conversationId)
    if body.policy is not None:
        command["policy"] = body.policy
    return json.dumps(command).encode()


async def _send_plan(
    platform: Platform, url: str, raw: bytes, headers: dict[str, str], agent_id: str
) -> dict[str, Any]:
    """POST the command to the agent; its answer, or AgentUnreachable / AgentRefused."""
    client = platform.http
    if client is None:
        raise AgentUnreachable("the platform's HTTP client is not running", agent=agent_id)
    try:
        answer = await client.post(
            url, content=raw, headers=headers, timeout=platform.settings.agent_timeout_seconds
        )
    except httpx.HTTPError as exc:
        raise AgentUnreachable(
            "the agent did not answer", agent=agent_id, reason=type(exc).__name__
        ) from None
    if answer.status_code not in (200, 201):
        try:
            code = str(answer.json().get("code", "error"))
        except ValueError:
            code = "error"
        raise AgentRefused(
            "the agent refused the request",
            agent=agent_id,
            agentCode=code,
            agentStatus=str(answer.status_code),
        )
    planned: dict[str, Any] = answer.json()
    return planned


async def bind_requester(
    kube: KubeClient, namespace: str, task_name: str, agent: str, request_id: str, requester: str
) -> bool:
    """Record `requester` on the task the agent says it made for plan request `request_id`,
    when the task bears that id and is the agent's own (`may_bind`); False otherwise (the
    task then stays requested by `agent:<name>`)."""
    if not task_name:
        return False
    try:
        task = AgenticTask.from_wire(await kube.get_task(namespace, task_name))
    except (KubeNotFound, ValueError):
        return False
    if task.metadata.annotations.get(REQUESTER_ANNOTATION) == requester:
        return True  # a retry of a request already bound
    if not may_bind(task, agent, request_id):
        return False
    try:
        await kube.annotate_task(namespace, task_name, {REQUESTER_ANNOTATION: requester})
    except KubeError:
        return False
    return True


async def _org_agent(
    session: Session, kube: KubeClient, org_id: uuid.UUID, name: str
) -> tuple[Org, dict[str, Any]]:
    """The org and its AgentInstance `name`; NotFound for either missing, or an instance of
    another org."""
    org = await session.get(Org, org_id)
    if org is None:
        raise NotFound("no such org")
    try:
        instance = await kube.get_agent_instance(org.namespace, name)
    except KubeNotFound:
        raise NotFound("no such agent") from None
    if str((instance.get("spec") or {}).get("orgId")) != str(org.id):
        raise NotFound("no such agent")
    return org, instance


@router.post(
    "/{name}/token/revoke",
    status_code=202,
    summary="Revoke an agent's token at once",
    description="Capability `agents.manage`, in one of the caller's orgs (404 otherwise, and "
    "for an agent the org does not have). From this moment the platform refuses the agent's "
    "tokens (401 `token_revoked`); the operator then issues a new token into the agent's "
    "Secret, with no grace for the revoked ones. The AgentInstance stays. Audited as "
    "`agent.token_revoked`.",
    responses=error_responses(401, 403, 404, 422, 503),
)
async def revoke_token(
    session: Session,
    platform: PlatformDep,
    scope: Annotated[OrgScope, require_in_org("agents.manage")],
    name: Annotated[str, Path(max_length=253, pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")],
) -> RevokedToken:
    kube = platform.kube
    if kube is None:
        raise KubernetesUnavailable("revoking a token needs the Kubernetes API")
    org, instance = await _org_agent(session, kube, scope.org_id, name)
    now = datetime.now(UTC)
    jti = ((instance.get("status") or {}).get("token") or {}).get("jti")
    value = f"{now.isoformat()} {scope.principal.username}"
    await kube.annotate_agent_instance(org.namespace, name, {REVOKE_TOKEN_ANNOTATION: value})
    agent_id = f"{org.namespace}/{name}"
    await record(
        session,
        actor=scope.principal.username,
        action="agent.token_revoked",
        target=f"agent:{agent_id}",
        org_id=org.id,
        details={"agent": agent_id, "jti": jti},
    )
    return RevokedToken(agent=agent_id, revokedJti=jti, requestedAt=now)
