"""Asking an org's agent to plan a request: the one path behind
`POST /orgs/{org_id}/agents/{name}/tasks` (the caller names the agent) and
`POST /orgs/{org_id}/tasks` (the router picks it, `platform_api.routing`).

The platform signs the command like every platform -> agent command
(`platform_api.agents.commands`), so an agent obeys only the platform.

The requester is the caller, vouched for by the platform, never by the agent (which is
untrusted): the command carries a plan request id (`humanwork_core.requester.plan_request_id`),
the agent puts it on the task it creates (whose `spec.requestedBy` admission pins to
`agent:<name>`), and when the agent answers with that task the platform writes the caller
into the task's annotation `humanwork.io/requester`, which only the platform API may write,
together with any annotations of the caller's path (the router's `humanwork.io/routed-by`
and `humanwork.io/routing-reason`, equally the platform's alone). The caller therefore
cannot approve the plan's steps; an agent that names another task, or none, leaves the task
requested by `agent:<name>`. Audited as `task.plan_requested`, with `requesterBound`.

Before the agent is asked at all, the request is bound to the caller
(`agents.bindings.bind_before_asking`, committed in a transaction of its own), so an agent
that answers late, fails or lies cannot leave the caller free to approve their own request:
the task carrying the request's id is theirs whatever it says, and a request never bound
makes them a requester of the agent's unvouched tasks (`tasks.requester.is_requester`).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from humanwork_core import tracing
from humanwork_core.requester import REQUESTER_ANNOTATION, may_bind, plan_request_id
from humanwork_core.resources import AgenticTask
from platform_api.agents.bindings import bind_before_asking, mark_bound
from platform_api.agents.commands import AgentCommands, AgentTarget, require_kube
from platform_api.db import Session, release
from platform_api.floor.audit.service import record
from platform_api.floor.principal import OrgScope
from platform_api.kube.client import KubeClient, KubeError, KubeNotFound
from platform_api.slots import Slot


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


class PlannedTask(BaseModel):
    """The task the agent created."""

    id: str = Field(description="`<namespace>/<name>`, the task's id in /agentic/tasks")
    created: bool = Field(description="false when the Idempotency-Key named an earlier plan")
    planner: str | None = None
    summary: str = ""
    steps: list[dict[str, Any]]


CorrectionsOf = Callable[[AsyncSession, uuid.UUID], Awaitable[list[dict[str, Any]]]]
"""The org's corrections for an agent command (session, org id) -> payload."""

ConfirmationsOf = Callable[[AsyncSession, KubeClient, uuid.UUID, str, str], Awaitable[bool]]
"""Records the client confirmations a task needs (session, kube, org id, namespace, task
name) -> written."""


@dataclass(frozen=True)
class Planner:
    """What asking an agent for a plan uses; built once by the app."""

    sessions: async_sessionmaker[AsyncSession]
    kube: KubeClient | None
    commands: AgentCommands
    corrections_of: CorrectionsOf | None = None
    """The org's newest corrections as a command carries them
    (`corrections.service.chat_payload`): a plan command carries them too."""
    confirmations_of: ConfirmationsOf | None = None
    """Called once the platform bound a task's requester: records which of its steps the
    initiating client must confirm (`confirmations.service.require_quietly`)."""


PLANNER: Slot[Planner] = Slot("planner")
PlannerDep = Annotated[Planner, Depends(PLANNER)]
"""Asking an org's agent for a plan."""


async def request_plan(
    session: Session,
    planner: Planner,
    scope: OrgScope,
    target: AgentTarget,
    body: PlanRequest,
    idempotency_key: str | None,
    *,
    annotations: Mapping[str, str] | None = None,
    details: Mapping[str, Any] | None = None,
) -> PlannedTask:
    """Send `target` the signed plan command, bind the caller (and `annotations`) to the
    task it answers with, audit `task.plan_requested` (with `details`), answer the plan.

    The trace starts here (`humanwork.plan_request`): the command carries it to the agent
    (`traceparent`), and the task keeps it (annotation `humanwork.io/traceparent`)."""
    attributes = {"humanwork.org.id": str(target.org.id), "humanwork.agent": target.name}
    with tracing.span("humanwork.plan_request", attributes, kind="server") as current:
        planned = await _request_plan(
            session, planner, scope, target, body, idempotency_key, annotations, details
        )
        tracing.annotate(current, {"humanwork.task": planned.id})
        return planned


async def _request_plan(
    session: Session,
    planner: Planner,
    scope: OrgScope,
    target: AgentTarget,
    body: PlanRequest,
    idempotency_key: str | None,
    annotations: Mapping[str, str] | None,
    details: Mapping[str, Any] | None,
) -> PlannedTask:
    kube = require_kube(planner.kube, "asking an agent")
    org, name = target.org, target.name
    requester = scope.principal.username
    request_id = plan_request_id(str(org.id), name, requester, idempotency_key)
    await release(session)  # the binding takes a transaction of its own: hold none meanwhile
    await bind_before_asking(planner.sessions, org.id, name, requester, request_id)
    command = plan_command(body, requester, request_id)
    if planner.corrections_of is not None:  # plans learn from corrections too
        command["corrections"] = await planner.corrections_of(session, org.id)
    planned = await planner.commands.send(target, "/v1/tasks", command, idempotency_key)
    task_id = f"{org.namespace}/{planned.get('name')}"
    bound = await bind_requester(
        kube,
        org.namespace,
        str(planned.get("name") or ""),
        name,
        request_id,
        requester,
        annotations,
    )
    if bound:
        await mark_bound(session, request_id, str(planned.get("name")))
        if planner.confirmations_of is not None:  # the client confirms its high stakes
            await planner.confirmations_of(
                session, kube, org.id, org.namespace, str(planned.get("name"))
            )
    await record(
        session,
        actor=scope.principal.username,
        action="task.plan_requested",
        target=f"task:{task_id}",
        org_id=org.id,
        details={
            "agent": target.agent_id,
            "created": bool(planned.get("created", True)),
            "requesterBound": bound,
            **(details or {}),
        },
    )
    return PlannedTask(
        id=task_id,
        created=bool(planned.get("created", True)),
        planner=planned.get("planner"),
        summary=str(planned.get("summary") or ""),
        steps=list(planned.get("steps") or []),
    )


def plan_command(body: PlanRequest, requester: str, request_id: str) -> dict[str, Any]:
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
    kube: KubeClient,
    namespace: str,
    task_name: str,
    agent: str,
    request_id: str,
    requester: str,
    annotations: Mapping[str, str] | None = None,
) -> bool:
    """Record `requester` (and `annotations`) on the task the agent says it made for plan
    request `request_id`, when the task bears that id and is the agent's own (`may_bind`);
    False otherwise (the task then stays requested by `agent:<name>`)."""
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
        await kube.annotate_task(
            namespace, task_name, {**_traced(annotations), REQUESTER_ANNOTATION: requester}
        )
    except KubeError:
        return False
    return True


def _traced(annotations: Mapping[str, str] | None) -> dict[str, str]:
    """`annotations` and, when a span is current, its traceparent (the task's trace)."""
    traceparent = tracing.traceparent()
    extra = {tracing.TRACEPARENT_ANNOTATION: traceparent} if traceparent else {}
    return {**(annotations or {}), **extra}
