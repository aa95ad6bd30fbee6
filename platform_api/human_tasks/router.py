"""`/human-tasks`: the review queue, answered from the watch-fed `DecisionIndex`; the
detail view of one waiting decision; `POST /human-tasks/{id}/resume`, which records the
expert's answer; `POST /human-tasks/{id}/resolve`, which resolves a step whose outcome is
unknown (see `human_tasks.resolve`); `POST /human-tasks/{id}/retry`, which runs a failed
step once more where its action is safe to retry (see `human_tasks.retry`); and
`POST /human-tasks/bulk-resume`, which decides many at once.

A human task's id is `<namespace>/<task name>/<step id>`. Resuming is idempotent by the
`Idempotency-Key` header, kept where the decision itself is kept: in the task's status.
A retry with the same key and body answers the identical body and writes nothing; the
same key with a different body answers 422 `idempotency_conflict`. A bulk resume's answer
is kept with its audit record (see `human_tasks.service`).
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Path, Query
from fastapi.responses import JSONResponse, Response

from humanwork_core.resources import Verdict
from platform_api.auth.dependencies import require
from platform_api.bounds import Limit, Offset
from platform_api.db import Session, Sessions, release
from platform_api.deactivation.guard import checks_activity_itself
from platform_api.errors import KubernetesUnavailable, NotFound, error_responses
from platform_api.floor.capabilities import DECIDE
from platform_api.floor.principal import Principal
from platform_api.human_tasks import reply_items
from platform_api.human_tasks import service as human_tasks
from platform_api.human_tasks.index import DecisionIndex, Decisions
from platform_api.human_tasks.moves import StepAt
from platform_api.human_tasks.reopen import ReopenBody, ReopenRead, reopen_expired
from platform_api.human_tasks.resolve import ResolveBody, ResolveRead, resolve_unknown
from platform_api.human_tasks.retry import RetryBody, RetryRead, retry_failed
from platform_api.human_tasks.schemas import (
    BulkResumeBody,
    BulkResumeRead,
    HumanTaskDetail,
    HumanTaskPage,
    ResumeBody,
    ResumeRead,
)
from platform_api.state import AppSettings, Kube
from platform_api.steps.http import (
    DECIDE_CODES,
    DECIDE_DESCRIPTION,
    UNAVAILABLE,
    Name,
    Namespace,
)
from platform_api.tasks.deciding import Decide
from platform_api.tasks.decisions import Ballot, Decider

router = APIRouter(prefix="/human-tasks", tags=["review queue"])

SYNC_WAIT_SECONDS = 10.0
StepId = Annotated[str, Path(max_length=63)]


async def _expert_at(
    namespace: Namespace,
    name: Name,
    step_id: StepId,
    session: Session,
    principal: Annotated[Principal, require(DECIDE)],
    kube: Kube,
) -> StepAt:
    """The step an expert's move names (capability `run.control`)."""
    return StepAt(session, kube, principal, namespace, name, step_id)


ExpertAt = Annotated[StepAt, Depends(_expert_at)]


async def _synced(index: DecisionIndex | None) -> DecisionIndex:
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
    "badge. Served from an in-memory index kept up to date by a watch of the AgenticTasks. "
    "Then the draft replies waiting for an expert (kind `reply`, id `replies/<id>`, oldest "
    "first; see `GET /human-tasks/replies/{id}`).",
    responses=error_responses(
        401, 403, 404, 422, 503, codes={503: ("kubernetes_unavailable", "no Kubernetes API")}
    ),
)
async def list_human_tasks(
    decisions: Decisions,
    settings: AppSettings,
    session: Session,
    principal: Annotated[Principal, require("tasks.read")],
    org_id: Annotated[uuid.UUID | None, Query(description="one of the caller's orgs")] = None,
    limit: Limit = 50,
    offset: Offset = 0,
) -> Response:
    if org_id is not None and org_id not in principal.org_ids:
        raise NotFound("no such org")
    index = await _synced(decisions)
    now = datetime.now(UTC)
    chosen = principal.org_ids if org_id is None else {org_id}
    near = timedelta(seconds=settings.queue_near_deadline_seconds)
    items = index.page_json(chosen, now, offset=offset, limit=limit, near=near)
    pending = index.count(principal.org_ids, now)
    total = pending if org_id is None else index.count(chosen, now)
    # the waiting draft replies (kind `reply`) follow the step decisions
    steps = total
    items += await reply_items.page_json(
        session, chosen, now, offset=max(0, offset - steps), limit=limit - len(items)
    )
    replies = await reply_items.count(session, principal.org_ids)
    pending += replies
    total += replies if org_id is None else await reply_items.count(session, chosen)
    # the items come serialised from the index (HumanTaskPage's shape); only the page's
    # frame is written here
    content = b'{"items":[%s],"total":%d,"pending_count":%d,"limit":%d,"offset":%d}' % (
        b",".join(items),
        total,
        pending,
        limit,
        offset,
    )
    return Response(content=content, media_type="application/json")


@router.post(
    "/bulk-resume",
    response_model=BulkResumeRead,
    summary="Resume many waiting decisions at once",
    description="Capability `run.control`. Applies one decision (`approve`, or `reject` "
    "with `feedback`) to every human-task id of `ids` (1 to 200, each at most once), each "
    "independently and by the same rules as a single decision: an expired, conflicting, "
    "unknown or other-org id fails on its own (`ok: false` with the error `code` a single "
    "decision would answer, e.g. `human_task_expired`, `run_state_conflict`, `not_found`) "
    "and does not sink the batch. Answers 200 with per-item results, the summary "
    '"N succeeded / M failed" and the failed ids grouped by code. Every decision written '
    "is audited like a single one, and the batch itself as `task.bulk_resume`. With "
    "`Idempotency-Key`, a retry answers the identical body and writes nothing; the same key "
    "with another body answers 422 `idempotency_conflict`.",
    responses=error_responses(
        401,
        403,
        422,
        503,
        codes={
            422: ("idempotency_conflict", "this idempotency key was used for a different batch"),
            503: ("kubernetes_unavailable", "no Kubernetes API"),
        },
    ),
)
async def bulk_resume(
    body: BulkResumeBody,
    session: Session,
    sessions: Sessions,
    decider: Decider,
    principal: Annotated[Principal, require(DECIDE)],
    kube: Kube,
    idempotency_key: Annotated[
        str | None, Header(alias="Idempotency-Key", min_length=1, max_length=128)
    ] = None,
) -> JSONResponse:
    await release(session)  # each item takes a session of its own: hold none meanwhile
    answer = await human_tasks.bulk_resume(
        sessions, decider, kube, principal, body, idempotency_key
    )
    return JSONResponse(answer)


@router.get(
    "/{namespace}/{name}/{step_id}",
    response_model=HumanTaskDetail,
    summary="One waiting decision in detail",
    description="Capability `tasks.read`. The human task `<namespace>/<task name>/<step "
    "id>` (the `id` of a queue item): the request prompt (the task's description), the "
    "whole plan (every step with its tool, parameters, risk, kind, options, decision and "
    "execution with its result summary), the conversation thread the task came from "
    "(`spec.conversationId`, its last 200 messages) with e-mail addresses, phone numbers, "
    "payment card numbers and tokens replaced by `[email]`, `[phone]`, `[card]` and "
    "`[token]`, the deadline, the status and the near-deadline flag. 404 for a task of an "
    "org the caller is not a member of. A task removed after it finished is answered from "
    "the archive (`archived: true`).",
    responses=error_responses(401, 403, 404, 422, 503, codes=UNAVAILABLE),
)
async def get_human_task(
    namespace: Namespace,
    name: Name,
    step_id: Annotated[str, Path(max_length=63)],
    session: Session,
    decisions: Decisions,
    settings: AppSettings,
    principal: Annotated[Principal, require("tasks.read")],
    kube: Kube,
) -> HumanTaskDetail:
    return await human_tasks.detail(
        session,
        kube,
        principal,
        decisions,
        namespace=namespace,
        name=name,
        step_id=step_id,
        near=timedelta(seconds=settings.queue_near_deadline_seconds),
        claim_lease_seconds=settings.tool_claim_lease_seconds,
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
@checks_activity_itself
async def resume(
    namespace: Namespace,
    name: Name,
    step_id: Annotated[str, Path(max_length=63)],
    body: ResumeBody,
    ctx: Decide,
    idempotency_key: Annotated[
        str | None, Header(alias="Idempotency-Key", min_length=1, max_length=128)
    ] = None,
) -> ResumeRead:
    key = idempotency_key or uuid.uuid4().hex
    ballot = Ballot(
        namespace,
        name,
        step_id,
        Verdict(body.action),
        body.feedback,
        body.step_hash,
        key,
        parameters=body.parameters,
        provided=body.content,
        selection=body.selection,
    )
    outcome = await ctx.decider.decide(ctx.session, ctx.kube, ctx.principal, ballot, ctx.org)
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


@router.post(
    "/{namespace}/{name}/{step_id}/resolve",
    response_model=ResolveRead,
    summary="Resolve a step whose outcome is unknown",
    description="Capability `run.control`. For a step in state `outcome_unknown` (its "
    "approved tool call reached the upstream, and whether it took effect is unknown: a "
    "timeout, a connection broken after sending, a 5xx answer to a write), after checking "
    "the upstream: `applied` finishes the proxy's claim so that the agent's next call "
    "replays it and the step completes; `not_applied` releases the claim so that the agent "
    "may call once more. Audited as `task.step.resolved`. Resolving again the same way "
    "changes nothing; the other way, or a step whose outcome is not unknown, answers 409 "
    "`conflict` (`details.reason` `outcome_not_unknown`). The task's requester cannot "
    "resolve its steps (403 `self_approval_forbidden`).",
    responses=error_responses(401, 403, 404, 409, 422, 503, codes=UNAVAILABLE),
)
async def resolve(at: ExpertAt, body: ResolveBody, settings: AppSettings) -> ResolveRead:
    return await resolve_unknown(at, body, settings.tool_claim_lease_seconds)


# --- an expert retries a failed step ----------------------------------------------------


@router.post(
    "/{namespace}/{name}/{step_id}/retry",
    response_model=RetryRead,
    summary="Retry a step whose tool call failed",
    description="Capability `run.control` (as approving). For a step whose execution "
    "`Failed` (its task failed with it), when the action catalog says the action is safe to "
    "retry (`retrySafe` in `GET /tools`: every read, and writes that set an absolute value): "
    "records the retry for the failed attempt after the same approved-step check as every "
    "execution; the task goes back to InProgress and the agent runs the step once more. The "
    "proxy's stored refusal for the step is released. Audited as `task.step.retried`. "
    "Retrying the same attempt again changes nothing. 409 `conflict` with `details.reason` "
    "`step_not_retryable` (the action is not safe to run twice), `step_not_failed` (the step "
    "did not fail, or its outcome is unknown: resolve it instead) or `task_terminal` (the "
    "task was cancelled, rejected or expired). The task's requester cannot retry its steps "
    "(403 `self_approval_forbidden`).",
    responses=error_responses(401, 403, 404, 409, 422, 503, codes=UNAVAILABLE),
)
async def retry(at: ExpertAt, body: RetryBody) -> RetryRead:
    return await retry_failed(at, body)


# reopening an expired decision
@router.post(
    "/{namespace}/{name}/{step_id}/reopen",
    response_model=ReopenRead,
    summary="Reopen a decision that expired",
    description="Capability `run.control`. For the step a task waits on whose decision "
    "expired (deadline passed, escalations spent) under the task policy's `onExpiry: "
    "AwaitReopen` (the default): gives it a new deadline, `deadline_seconds` from now "
    "(default the policy's decisionDeadlineSeconds), after which it can be decided again. "
    "Audited as `task.step.reopened`. A step that has not expired, one the task does not "
    "wait on, or a task that ended (`onExpiry: End` ends it in phase Expired) answers 409 "
    "`conflict` with `details.reason` (`decision_not_expired`, `step_not_decidable`, "
    "`task_terminal`).",
    responses=error_responses(401, 403, 404, 409, 422, 503, codes=UNAVAILABLE),
)
async def reopen(at: ExpertAt, body: ReopenBody) -> ReopenRead:
    return await reopen_expired(at, body)
