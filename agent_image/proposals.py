"""Proposing a plan (UC-11): from a request to the AgenticTask waiting for the expert.

:func:`propose` runs named steps: find the task an idempotency key already made, resolve
the revised task's feedback, plan, build the task (spec, annotations, labels), create it in
the agent's namespace and announce it with `task.plan_ready`. The task is requested by
`agent:<name>` (the only requester admission lets an agent name) and carries the
platform's plan request id, through which the platform binds the real requester to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent_image.commands import ValidationFailed, kube_error
from agent_image.kube import KubeConflict, KubeError
from agent_image.planning.drafts import Plan
from agent_image.planning.learned import apply_corrections
from agent_image.runtime import Runtime
from humanwork_core import keys
from humanwork_core.requester import PLAN_REQUEST_ANNOTATION, agent_requester
from humanwork_core.resources import AgenticTaskSpec

MANAGED_BY = "humanwork-agent"
AGENT_LABEL = keys.AGENT_LABEL
PLANNER_ANNOTATION = keys.PLANNER
MODEL_ANNOTATION = keys.MODEL
MODE_ANNOTATION = keys.MODE
IDEMPOTENCY_ANNOTATION = keys.IDEMPOTENCY_KEY


@dataclass(frozen=True)
class Proposal:
    """What the platform asks the agent to plan (a verified `/v1/tasks` command)."""

    request: str
    requester: str
    conversation_id: str | None = None
    revises: str | None = None
    feedback: str | None = None
    policy: dict[str, Any] | None = None
    idempotency_key: str | None = None
    plan_request: str | None = None


async def propose(runtime: Runtime, proposal: Proposal) -> tuple[dict[str, Any], Plan | None, bool]:
    """Plan `proposal` and create its AgenticTask (emitting `task.plan_ready`);
    (the task, the plan, True) — or (the existing task, None, False) when the
    idempotency key already made one."""
    name = runtime.task_name(proposal.idempotency_key)
    existing = await _existing(runtime, name, proposal)
    if existing is not None:
        return existing, None, False
    feedback = await _revision_feedback(runtime, proposal)
    plan = await runtime.planner.plan(proposal.request, runtime.config(), feedback=feedback)
    plan = apply_corrections(plan, proposal.request, runtime.corrections)
    body = task_body(runtime, name, proposal, plan)
    task, created = await _create(runtime, name, proposal, body)
    if not created:
        return task, None, False
    runtime.metrics.planned(plan.planner)
    await _announce(runtime, name, proposal, plan, task, body["spec"])
    return task, plan, True


async def _existing(runtime: Runtime, name: str, proposal: Proposal) -> dict[str, Any] | None:
    """The task this proposal's idempotency key already made, if any."""
    if not proposal.idempotency_key:
        return None
    return await runtime.own_task(name)


async def _revision_feedback(runtime: Runtime, proposal: Proposal) -> str | None:
    """The feedback to plan with: the given one, else (for a revision) the expert's
    feedback on the rejected step of the revised task."""
    if not proposal.revises:
        return proposal.feedback
    previous = await runtime.own_task(proposal.revises)
    if previous is None:
        raise ValidationFailed(f"revises names no task of this agent: {proposal.revises}")
    return proposal.feedback or rejection_feedback(previous)


def task_spec(runtime: Runtime, proposal: Proposal, plan: Plan) -> dict[str, Any]:
    """The AgenticTask's spec (validated as the API server would)."""
    settings = runtime.settings
    spec: dict[str, Any] = {
        "orgId": settings.org_id,
        "agentRef": {"name": settings.agent_name},
        "description": proposal.request[:4096],
        "requestedBy": agent_requester(settings.agent_name),
        "steps": plan.wire_steps(),
    }
    if proposal.conversation_id:
        spec["conversationId"] = proposal.conversation_id
    if proposal.revises:
        spec["revisionOf"] = proposal.revises
    if proposal.policy:
        spec["policy"] = proposal.policy
    AgenticTaskSpec.from_wire(spec)  # the API server would refuse what this refuses
    return spec


def task_annotations(proposal: Proposal, plan: Plan) -> dict[str, str]:
    """Who planned (planner, model, mode), the idempotency key and the plan request id."""
    annotations = {
        PLANNER_ANNOTATION: plan.planner,
        MODEL_ANNOTATION: plan.model,
        MODE_ANNOTATION: plan.mode.value,
    }
    if proposal.idempotency_key:
        annotations[IDEMPOTENCY_ANNOTATION] = proposal.idempotency_key[:256]
    if proposal.plan_request:
        annotations[PLAN_REQUEST_ANNOTATION] = proposal.plan_request
    return annotations


def task_body(runtime: Runtime, name: str, proposal: Proposal, plan: Plan) -> dict[str, Any]:
    """The AgenticTask to create (metadata and spec)."""
    return {
        "metadata": {
            "name": name,
            "labels": {
                "app.kubernetes.io/managed-by": MANAGED_BY,
                AGENT_LABEL: runtime.settings.agent_name,
            },
            "annotations": task_annotations(proposal, plan),
        },
        "spec": task_spec(runtime, proposal, plan),
    }


async def _create(
    runtime: Runtime, name: str, proposal: Proposal, body: dict[str, Any]
) -> tuple[dict[str, Any], bool]:
    """(the created task, True); (the existing task, False) when a concurrent retry of the
    same idempotency key made it first; raises the agent's Kubernetes error otherwise."""
    try:
        return await runtime.kube.create_task(body), True
    except KubeConflict:
        existing = await runtime.own_task(name) if proposal.idempotency_key else None
        if existing is None:
            raise
        return existing, False
    except KubeError as exc:
        raise kube_error(exc) from None


async def _announce(
    runtime: Runtime,
    name: str,
    proposal: Proposal,
    plan: Plan,
    task: dict[str, Any],
    spec: dict[str, Any],
) -> None:
    """Tell the platform the plan is ready (`task.plan_ready`)."""
    await runtime.events.emit(
        "task.plan_ready",
        task_id=name,
        payload={
            "task": name,
            "namespace": runtime.settings.namespace,
            "uid": (task.get("metadata") or {}).get("uid"),
            "description": spec["description"],
            "requestedBy": proposal.requester,
            "conversationId": proposal.conversation_id,
            "revisionOf": proposal.revises,
            "planner": plan.planner,
            "model": plan.model,
            "mode": plan.mode.value,
            "summary": plan.summary,
            "warnings": list(plan.warnings),
            "steps": plan.wire_steps(),
        },
        idempotency_key=f"plan_ready:{runtime.settings.agent_id}:{name}",
    )


def rejection_feedback(task: dict[str, Any]) -> str | None:
    """The expert's feedback on the rejected step of a task (or the initiating client's
    reason for declining a step, which halts the task the same way), if any."""
    for entry in (task.get("status") or {}).get("steps") or []:
        decision = entry.get("decision") or {}
        if decision.get("verdict") == "reject":
            return str(decision.get("feedback") or "") or None
        confirmation = entry.get("confirmation") or {}
        if confirmation.get("required") and confirmation.get("state") == "declined":
            reason = str(confirmation.get("reason") or "")
            return f"the client declined: {reason}" if reason else None
    return None
