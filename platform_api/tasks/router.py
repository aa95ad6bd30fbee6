"""`/agentic/tasks`: create a task from a plan, list and read the caller's tasks, approve
or reject a step.

A task's id is `<namespace>/<name>`, so its URL is `/agentic/tasks/<namespace>/<name>`;
its UID (`metadata.uid`, seed 000's task id) addresses it too: `/agentic/tasks/<uid>` and
`/agentic/tasks/<uid>/steps/<step>/approve|reject` (resolved within the caller's orgs, see
`lookup`).
Every endpoint answers 503 `kubernetes_unavailable` when the platform has no Kubernetes
API configured, and 404 for a task of an org the caller is not a member of.
"""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Header, Path, Query, Request, status

from humanwork_core.resources import Verdict
from platform_api.auth.dependencies import CurrentPrincipal, ensure_capability, require
from platform_api.bounds import Limit, Offset
from platform_api.db import Session, Sessions
from platform_api.deactivation.guard import checks_activity_itself
from platform_api.deactivation.repository import ensure_active
from platform_api.errors import NotFound, error_responses
from platform_api.floor.principal import Principal
from platform_api.openapi import EXTENSION
from platform_api.state import Kube
from platform_api.steps.http import (
    DECIDE_CODES,
    DECIDE_DESCRIPTION,
    UNAVAILABLE,
    Name,
    Namespace,
)
from platform_api.tasks import lookup, service
from platform_api.tasks.deciding import Decide, Deciding
from platform_api.tasks.decisions import Ballot
from platform_api.tasks.orgs import Directory
from platform_api.tasks.schemas import (
    ApproveBody,
    DecisionRead,
    PhaseFilter,
    RejectBody,
    TaskCreate,
    TaskPage,
    TaskRead,
)

router = APIRouter(prefix="/agentic/tasks", tags=["tasks"])

TaskUid = Annotated[
    uuid.UUID, Path(description="the task's UID (`metadata.uid`, the `uid` of its read model)")
]
StepId = Annotated[str, Path(max_length=63, description="the step's id in the plan")]
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=128,
        description="makes a retry a no-op that answers the recorded decision; a random "
        "key when unset",
    ),
]


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=TaskRead,
    summary="Create a task from a plan",
    description="Capability `run.control` (404 first for an org the caller is not a member "
    "of). Creates an AgenticTask in the org's namespace; "
    "the caller becomes its requester (`spec.requestedBy`) and may not approve its steps.",
    responses=error_responses(401, 403, 404, 409, 422, 503, codes=UNAVAILABLE),
    openapi_extra={EXTENSION: ["run.control"]},  # checked in the handler: the org is in the body
)
async def create_task(
    body: TaskCreate,
    request: Request,
    session: Session,
    sessions: Sessions,
    principal: CurrentPrincipal,
    kube: Kube,
) -> TaskRead:
    if body.org_id not in principal.org_ids:
        raise NotFound("no such org")
    await ensure_capability(request, principal, sessions, "run.control", body.org_id)
    await ensure_active(session, body.org_id)  # no new work
    return await service.create_task(session, kube, principal, body)


@router.get(
    "",
    response_model=TaskPage,
    summary="List tasks",
    description="Capability `tasks.read`. The tasks of the caller's orgs (or of `org_id`), "
    "newest first; `status` filters by phase (`pending_approval`, `in_progress`, "
    "`completed`, `rejected`, `failed`, `cancelled`, `expired`); `limit` and `offset` page. "
    "Finished tasks whose resource the operator removed (after their TTL, once the "
    "platform archived them) are included from the archive, with `archived: true`.",
    responses=error_responses(401, 403, 404, 422, 503, codes=UNAVAILABLE),
)
async def list_tasks(
    session: Session,
    principal: Annotated[Principal, require("tasks.read")],
    kube: Kube,
    org_id: Annotated[uuid.UUID | None, Query(description="one of the caller's orgs")] = None,
    task_status: Annotated[PhaseFilter | None, Query(alias="status")] = None,
    limit: Limit = 50,
    offset: Offset = 0,
) -> TaskPage:
    items, total = await service.list_tasks(
        session, kube, principal, org_id=org_id, status=task_status, limit=limit, offset=offset
    )
    return TaskPage(items=items, total=total, limit=limit, offset=offset)


@router.get(
    "/{namespace}/{name}",
    response_model=TaskRead,
    summary="Read a task",
    description="Capability `tasks.read`. The task `<namespace>/<name>` with its status and "
    "full plan, and the hash of each step that a decision on it carries. When the resource "
    "is gone (a finished task is removed after its TTL once archived), the task is answered "
    "from the platform's archive as it was when it finished, with `archived: true` and an "
    "empty `resource_version`.",
    responses=error_responses(401, 403, 404, 422, 503, codes=UNAVAILABLE),
)
async def get_task(
    namespace: Namespace,
    name: Name,
    session: Session,
    orgs: Directory,
    principal: Annotated[Principal, require("tasks.read")],
    kube: Kube,
) -> TaskRead:
    return await service.get_task(session, kube, principal, namespace, name, orgs)


async def _decide(
    ctx: Deciding,
    namespace: str,
    name: str,
    step_id: str,
    verdict: Verdict,
    body: ApproveBody | RejectBody,
    idempotency_key: str | None,
) -> DecisionRead:
    key = idempotency_key or uuid.uuid4().hex
    ballot = Ballot(namespace, name, step_id, verdict, body.feedback, body.step_hash, key)
    outcome = await ctx.decider.decide(ctx.session, ctx.kube, ctx.principal, ballot, ctx.org)
    return DecisionRead(
        step_id=step_id,
        verdict=verdict.value,
        decided=outcome.decided,
        approvals=outcome.approvals,
        required_approvals=outcome.required_approvals,
        replayed=outcome.replayed,
        idempotency_key=key,
        task=outcome.task,
    )


@router.post(
    "/{namespace}/{name}/steps/{step_id}/approve",
    response_model=DecisionRead,
    summary="Approve a step",
    description="Capability `run.control`. The requester cannot approve its own task (403 "
    "`self_approval_forbidden`); a risk that needs several approvals needs that many "
    "distinct experts (409 `duplicate_approver`)." + DECIDE_DESCRIPTION,
    responses=error_responses(401, 403, 404, 409, 410, 422, 503, codes=DECIDE_CODES),
)
@checks_activity_itself
async def approve_step(
    namespace: Namespace,
    name: Name,
    step_id: StepId,
    ctx: Decide,
    idempotency_key: IdempotencyKey = None,
    body: ApproveBody | None = None,
) -> DecisionRead:
    approval = body or ApproveBody()
    return await _decide(ctx, namespace, name, step_id, Verdict.APPROVE, approval, idempotency_key)


@router.post(
    "/{namespace}/{name}/steps/{step_id}/reject",
    response_model=DecisionRead,
    summary="Reject a step",
    description="Capability `run.control`. `feedback` is required; the rejection halts the "
    "task and the feedback goes back to the agent." + DECIDE_DESCRIPTION,
    responses=error_responses(401, 403, 404, 409, 410, 422, 503, codes=DECIDE_CODES),
)
@checks_activity_itself
async def reject_step(
    namespace: Namespace,
    name: Name,
    step_id: StepId,
    body: RejectBody,
    ctx: Decide,
    idempotency_key: IdempotencyKey = None,
) -> DecisionRead:
    return await _decide(ctx, namespace, name, step_id, Verdict.REJECT, body, idempotency_key)


# --- the same, by the task's UID (seed 000's `/agentic/tasks/:id`) ---------------------------

BY_UID = (
    " The task is named by its UID (`metadata.uid`), as seed 000's clients hold it; a UID "
    "of no task of the caller's orgs answers 404 `not_found`, exactly like an unknown one."
)


@router.get(
    "/{task_uid}",
    response_model=TaskRead,
    summary="Read a task by its UID",
    description="Capability `tasks.read`. The same answer as "
    "`GET /agentic/tasks/{namespace}/{name}`." + BY_UID,
    responses=error_responses(401, 403, 404, 422, 503, codes=UNAVAILABLE),
)
async def get_task_by_uid(
    task_uid: TaskUid,
    session: Session,
    principal: Annotated[Principal, require("tasks.read")],
    kube: Kube,
) -> TaskRead:
    return await lookup.get_task_by_uid(session, kube, principal, task_uid)


@router.post(
    "/{task_uid}/steps/{step_id}/approve",
    response_model=DecisionRead,
    summary="Approve a step of a task named by its UID",
    description="Capability `run.control`. The same rules and answers as "
    "`POST /agentic/tasks/{namespace}/{name}/steps/{step_id}/approve`." + BY_UID,
    responses=error_responses(401, 403, 404, 409, 410, 422, 503, codes=DECIDE_CODES),
)
@checks_activity_itself
async def approve_step_by_uid(
    task_uid: TaskUid,
    step_id: StepId,
    ctx: Decide,
    idempotency_key: IdempotencyKey = None,
    body: ApproveBody | None = None,
) -> DecisionRead:
    namespace, name = await lookup.name_of_uid(ctx.session, ctx.kube, ctx.principal, task_uid)
    return await approve_step(namespace, name, step_id, ctx, idempotency_key, body)


@router.post(
    "/{task_uid}/steps/{step_id}/reject",
    response_model=DecisionRead,
    summary="Reject a step of a task named by its UID",
    description="Capability `run.control`. The same rules and answers as "
    "`POST /agentic/tasks/{namespace}/{name}/steps/{step_id}/reject`." + BY_UID,
    responses=error_responses(401, 403, 404, 409, 410, 422, 503, codes=DECIDE_CODES),
)
@checks_activity_itself
async def reject_step_by_uid(
    task_uid: TaskUid,
    step_id: StepId,
    body: RejectBody,
    ctx: Decide,
    idempotency_key: IdempotencyKey = None,
) -> DecisionRead:
    namespace, name = await lookup.name_of_uid(ctx.session, ctx.kube, ctx.principal, task_uid)
    return await reject_step(namespace, name, step_id, body, ctx, idempotency_key)
