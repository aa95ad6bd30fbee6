"""`/human-tasks`: the review queue, answered from the watch-fed `DecisionIndex`, and
`POST /human-tasks/{id}/resume`, which records the expert's answer.

A human task's id is `<namespace>/<task name>/<step id>`. Resuming is idempotent by the
`Idempotency-Key` header, kept where the decision itself is kept: in the task's status.
A retry with the same key and body answers the identical body and writes nothing; the
same key with a different body answers 422 `idempotency_conflict`.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Header, Path, Query

from humanwork_core.resources import Verdict
from platform_api.auth.dependencies import Principal, require
from platform_api.db import Session
from platform_api.errors import KubernetesUnavailable, NotFound, error_responses
from platform_api.human_tasks.index import DecisionIndex, OpenDecision
from platform_api.human_tasks.schemas import HumanTask, HumanTaskPage, ResumeBody, ResumeRead
from platform_api.state import PlatformDep
from platform_api.tasks import service
from platform_api.tasks.router import DECIDE_CODES, DECIDE_DESCRIPTION, Kube, Name, Namespace

router = APIRouter(prefix="/human-tasks", tags=["review queue"])

SYNC_WAIT_SECONDS = 10.0


def _item(decision: OpenDecision, now: datetime, near: timedelta) -> HumanTask:
    task = decision.task
    task_id = f"{task.metadata.namespace}/{task.metadata.name}"
    created = task.metadata.creation_timestamp or now
    return HumanTask(
        id=f"{task_id}/{decision.step.id}",
        task_id=task_id,
        run_id=task.metadata.uid or "",
        org_id=decision.org_id,
        workflow=task.spec.agent_ref.name,
        summary=task.spec.description,
        requested_by=task.spec.requested_by,
        step_id=decision.step.id,
        step_description=decision.step.description,
        tool=decision.step.tool,
        risk=decision.risk.value,
        status="escalated" if decision.escalations > 0 else "pending",
        deadline=decision.deadline,
        near_deadline=decision.deadline is not None and decision.deadline - now <= near,
        escalations=decision.escalations,
        age_seconds=max(0, int((now - created).total_seconds())),
    )


async def _synced(platform: PlatformDep) -> DecisionIndex:
    index = platform.decisions
    if index is None:
        raise KubernetesUnavailable("no Kubernetes API is configured")
    try:
        await asyncio.wait_for(index.ready.wait(), SYNC_WAIT_SECONDS)
    except TimeoutError:
        raise KubernetesUnavailable("the review queue has not synchronised yet") from None
    return index


@router.get(
    "",
    response_model=HumanTaskPage,
    summary="The review queue",
    description="Capability `tasks.read`. Every decision waiting on a human in the caller's "
    "orgs (or in `org_id`), deadline first: pending and escalated steps, with a "
    "near-deadline flag, the risk and the age, plus the pending count for the navigation "
    "badge. Served from an in-memory index kept up to date by a watch of the AgenticTasks.",
    responses=error_responses(
        401, 403, 404, 422, 503, codes={503: ("kubernetes_unavailable", "no Kubernetes API")}
    ),
)
async def list_human_tasks(
    platform: PlatformDep,
    principal: Annotated[Principal, require("tasks.read")],
    org_id: Annotated[uuid.UUID | None, Query(description="one of the caller's orgs")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> HumanTaskPage:
    if org_id is not None and org_id not in principal.org_ids:
        raise NotFound("no such org")
    index = await _synced(platform)
    now = datetime.now(UTC)
    every = index.open(principal.org_ids, now)
    chosen = [d for d in every if org_id is None or d.org_id == org_id]
    near = timedelta(seconds=platform.settings.queue_near_deadline_seconds)
    return HumanTaskPage(
        items=[_item(d, now, near) for d in chosen[offset : offset + limit]],
        total=len(chosen),
        pending_count=len(every),
        limit=limit,
        offset=offset,
    )


@router.post(
    "/{namespace}/{name}/{step_id}/resume",
    response_model=ResumeRead,
    summary="Resume a waiting decision",
    description="Capability `run.control`. `action` is `approve`, `reject` (with "
    "`feedback`), `provide` (with `content`), `edit` (with amended `parameters`) or "
    "`select` (with one of the step's options). The requester cannot approve its own task "
    "(403 `self_approval_forbidden`). With `Idempotency-Key`, a retry answers the "
    "identical body and writes nothing; the same key with another body answers 422 "
    "`idempotency_conflict`." + DECIDE_DESCRIPTION,
    responses=error_responses(401, 403, 404, 409, 410, 422, 503, codes=DECIDE_CODES),
)
async def resume(
    namespace: Namespace,
    name: Name,
    step_id: Annotated[str, Path(max_length=63)],
    body: ResumeBody,
    session: Session,
    platform: PlatformDep,
    principal: Annotated[Principal, require("run.control")],
    kube: Kube,
    idempotency_key: Annotated[
        str | None, Header(alias="Idempotency-Key", min_length=1, max_length=128)
    ] = None,
) -> ResumeRead:
    key = idempotency_key or uuid.uuid4().hex
    outcome = await service.decide(
        session,
        kube,
        principal,
        namespace=namespace,
        name=name,
        step_id=step_id,
        verdict=Verdict(body.action),
        feedback=body.feedback,
        step_hash=body.step_hash,
        idempotency_key=key,
        retries=platform.settings.decision_retries,
        sessions=platform.sessions,
        parameters=body.parameters,
        provided=body.content,
        selection=body.selection,
    )
    assert outcome.recorded is not None  # decide recorded (or found) this key's decision
    return ResumeRead(
        id=f"{namespace}/{name}/{step_id}",
        task_id=f"{namespace}/{name}",
        step_id=step_id,
        action=body.action,
        idempotency_key=key,
        required_approvals=outcome.required_approvals,
        decision=outcome.recorded.to_wire(),
    )
