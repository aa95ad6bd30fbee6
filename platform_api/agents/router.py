"""`POST /orgs/{org_id}/agents/{name}/tasks` (capability `run.control`): ask an org's agent
to plan a request. The plan comes back as an AgenticTask waiting in the review queue.

The platform signs the command like every platform -> agent command
(`platform_api.agents.commands`), so an agent obeys only the platform.

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

import uuid
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Header, Path
from pydantic import BaseModel, ConfigDict, Field

from humanwork_core import keys
from humanwork_core.requester import REQUESTER_ANNOTATION, may_bind, plan_request_id
from humanwork_core.resources import AgenticTask
from platform_api.access.principal import OrgScope
from platform_api.agents.commands import AgentCommands, org_agent, require_kube
from platform_api.audit.service import record
from platform_api.auth.dependencies import require_in_org
from platform_api.db import Session
from platform_api.errors import error_responses
from platform_api.kube.client import KubeClient, KubeError, KubeNotFound
from platform_api.state import PlatformDep

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


@router.post(
    "/{name}/tasks",
    status_code=201,
    summary="Ask an agent to plan a request",
    description="Capability `run.control`, in one of the caller's orgs (404 otherwise, and "
    "for an agent the org does not have). The platform sends the agent a signed command; "
    "the agent creates the AgenticTask, whose steps then wait for experts. "
    "`Idempotency-Key` is passed on: a retry names the same task. 409 `agent_not_ready` "
    "for an agent not provisioned yet (no endpoint), 502 `agent_unreachable` when the agent "
    "cannot be reached, 502 `agent_refused` with the agent's error code in `details` when "
    "it refuses.",
    responses=error_responses(
        401,
        403,
        404,
        409,
        422,
        502,
        503,
        codes={
            409: ("agent_not_ready", "the agent has no endpoint yet"),
            502: ("agent_unreachable", "the agent did not answer"),
        },
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
    kube = require_kube(platform, "asking an agent")
    target = await org_agent(session, kube, scope.org_id, name)
    org, agent_id = target.org, target.agent_id
    requester = scope.principal.username
    request_id = plan_request_id(str(org.id), name, requester, idempotency_key)
    planned = await AgentCommands(platform).send(
        target, "/v1/tasks", _plan_command(body, requester, request_id), idempotency_key
    )
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


def _plan_command(body: PlanRequest, requester: str, request_id: str) -> dict[str, Any]:
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
    return command


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
    kube = require_kube(platform, "revoking a token")
    target = await org_agent(session, kube, scope.org_id, name)
    org, instance = target.org, target.instance
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
