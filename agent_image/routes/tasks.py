"""`POST /v1/tasks` (plan a request into an AgenticTask) and `POST /v1/tasks/{name}/cancel`."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from agent_image.commands import CancelRequest, NotFound, TaskRequest, TaskTerminalError, parse
from agent_image.planning.drafts import Plan
from agent_image.proposals import (
    MODE_ANNOTATION,
    MODEL_ANNOTATION,
    PLANNER_ANNOTATION,
    Proposal,
    propose,
)
from agent_image.routes.corrections import from_command
from agent_image.routes.deps import RuntimeDep, Signed
from agent_image.runtime import Runtime
from humanwork_core import signing, tracing
from humanwork_core.resources import TaskPhase

LOG = logging.getLogger("humanwork.agent")

router = APIRouter(prefix="/v1/tasks", tags=["tasks"])


@router.post("", status_code=201)
async def create_task(raw: Signed, request: Request, rt: RuntimeDep) -> JSONResponse:
    """Plan a request (UC-11): creates the AgenticTask in the agent's namespace (as
    the agent's own ServiceAccount) and emits `task.plan_ready`. 201 with the task's
    name and plan; 200 with the existing task when its idempotency key (the body's
    `idempotencyKey`, else the `Idempotency-Key` header, else the signature: a replay
    is the same request) already made one."""
    body = parse(TaskRequest, raw)
    if body.corrections:  # the org's corrections, kept here (as for a chat)
        missing = rt.corrections.missing([from_command(c) for c in body.corrections])
        if missing:
            rt.corrections.add(missing)
    attributes = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": rt.settings.agent_name,
        "humanwork.namespace": rt.settings.namespace,
    }
    parent = tracing.context_from_headers(request.headers)  # the platform's plan request
    with tracing.span("invoke_agent", attributes, parent=parent, kind="server") as current:
        proposal = Proposal(
            request=body.request,
            requester=body.requester,
            conversation_id=body.conversation_id,
            revises=body.revises,
            feedback=body.feedback,
            policy=body.policy,
            plan_request=body.plan_request,
            idempotency_key=body.idempotency_key
            or request.headers.get(signing.IDEMPOTENCY_HEADER)
            or request.headers.get(signing.SIGNATURE_HEADER),
        )
        task, plan, created = await propose(rt, proposal)
        tracing.annotate(current, {"humanwork.task": str(task["metadata"]["name"])})
    return JSONResponse(_answer(task, plan, created), status_code=201 if created else 200)


def _answer(task: dict[str, Any], plan: Plan | None, created: bool) -> dict[str, Any]:
    """The task's name and plan (from its annotations when it existed already)."""
    meta = task.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    return {
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "uid": meta.get("uid"),
        "created": created,
        "planner": plan.planner if plan else annotations.get(PLANNER_ANNOTATION),
        "model": plan.model if plan else annotations.get(MODEL_ANNOTATION),
        "mode": plan.mode.value if plan else annotations.get(MODE_ANNOTATION),
        "summary": plan.summary if plan else "",
        "warnings": list(plan.warnings) if plan else [],
        "steps": (task.get("spec") or {}).get("steps", []),
    }


@router.post("/{name}/cancel", status_code=202)
async def cancel_task(name: str, raw: Signed, rt: RuntimeDep) -> dict[str, Any]:
    """Stop working on a task.

    The agent's identity may write only each step's `execution` (the admission
    policies; the phase, Cancelled included, is the operator's). So the cancellation
    is the agent's own: recorded in its state folder (it survives a restart), no
    further step of the task is executed, and the platform is told with an `error`
    event of code `task_cancelled`, so that it records the cancellation in the task
    through its own identity. A step already running finishes and reports how it ended.
    """
    body = parse(CancelRequest, raw)
    task = await rt.own_task(name)
    if task is None:
        raise NotFound(f"this agent has no task {name}", task=name)
    phase = (task.get("status") or {}).get("phase")
    if phase and TaskPhase(phase).terminal:
        raise TaskTerminalError(f"the task is already {phase}", task=name, phase=phase)
    already = rt.is_cancelled(name)
    if not already:
        await _cancel(rt, name, task, body)
    return {"task": name, "cancelled": True, "alreadyCancelled": already, "scope": "agent"}


async def _cancel(rt: Runtime, name: str, task: dict[str, Any], body: CancelRequest) -> None:
    """Record the cancellation, stop the task's work and tell the platform."""
    rt.cancelled.add(name, reason=body.reason, by=body.by)
    for hook in list(rt.on_cancel):
        try:
            await hook(name)
        except Exception:
            LOG.exception("cancel hook failed for %s", name)
    status = task.get("status") or {}
    await rt.events.emit(
        "error",
        task_id=name,
        payload={
            "code": "task_cancelled",
            "message": "the task was cancelled; the agent executes none of its remaining steps",
            "reason": body.reason,
            "by": body.by,
            "phase": status.get("phase"),
            "currentStep": status.get("currentStep"),
        },
        idempotency_key=f"cancel:{rt.settings.agent_id}:{name}",
    )
