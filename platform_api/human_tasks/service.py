"""Review-queue use cases beyond the list: the detail view of one waiting decision and
the bulk resume.

Bulk resume applies one decision to many human tasks, each independently, in a transaction
of its own, through the same decision service (`tasks.decisions`) as a single decision (the
same rules, the same audit rows). With an `Idempotency-Key`, each item's decision carries a
key derived from the batch key, the caller and the item, and the batch's answer is kept in
the audit log (action `task.bulk_resume`, platform chain, with the request's hash): a retry
with the same key and body answers that body again and writes nothing; the same key with
another body answers 422 `idempotency_conflict`. A batch interrupted half-way is safely
retried with the same key: the items already decided replay their decisions."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from humanwork_core import catalog, taskflow
from humanwork_core.plandiff import plan_diff
from humanwork_core.policy import OrgPolicy, effective_risk
from humanwork_core.requester import requester_of
from humanwork_core.resources import AgenticTask, ExecutionState, TaskPhase, Verdict
from platform_api.conversations.repository import ConversationRepository
from platform_api.errors import IdempotencyConflict, NotFound, PlatformError, from_core
from platform_api.floor.audit.service import record
from platform_api.floor.principal import Principal
from platform_api.human_tasks.index import DecisionIndex
from platform_api.human_tasks.redact import redact
from platform_api.human_tasks.schemas import (
    BulkItem,
    BulkResumeBody,
    BulkResumeRead,
    HumanTaskDetail,
    PlanStep,
    RevisionRead,
    StepChangeRead,
    StepExecution,
    Thread,
    ThreadMessage,
    ValueChange,
)
from platform_api.human_tasks.unknown import unknown_outcome
from platform_api.kube.client import KubeClient, KubeError
from platform_api.mcp_servers.pins import pinned_definitions
from platform_api.mcp_servers.schemas import ToolDefinitionRead
from platform_api.models import AuditRecord
from platform_api.orgs.repository import OrgRepository
from platform_api.tasks.decisions import Ballot, DecisionService
from platform_api.tasks.orgs import OrgRef
from platform_api.tasks.service import org_of_namespace, phase_of, read_or_archived

THREAD_MESSAGES = 200
BULK_CONCURRENCY = 4
"""Items decided at once; each holds at most two database connections (its transaction,
and a refused self-approval's audit row)."""
BULK_ACTION = "task.bulk_resume"


# --- the detail view -----------------------------------------------------------------------


def _status(task: AgenticTask, step_id: str, now: datetime) -> str:
    entry = task.current_status().step(step_id)
    if taskflow.is_outcome_unknown(entry) and not taskflow.is_resolved(entry):
        return "outcome_unknown"
    if (
        entry.execution is not None
        and entry.execution.state is ExecutionState.FAILED
        and not taskflow.is_retried(entry)
    ):
        return "failed"
    step = task.step(step_id)
    if entry.decision is not None and step is not None and taskflow.awaits_client(step, entry):
        return "waiting_for_client"
    if entry.decision is not None:
        return "decided"
    if taskflow.is_expired(entry, task.spec.policy, now):  # Expired state, or a reopening due
        return "expired"
    phase = phase_of(task, now)
    if phase.terminal:
        return "expired" if phase is TaskPhase.EXPIRED else "closed"
    decidable = taskflow.decidable_step(task)
    if decidable is None or decidable.id != step_id:
        return "waiting"
    return "escalated" if entry.escalations > 0 else "pending"


def _plan(
    task: AgenticTask, org_policy: OrgPolicy, pins: dict[str, ToolDefinitionRead]
) -> list[PlanStep]:
    status = task.current_status()
    steps = []
    for step in task.spec.steps:
        entry = status.step(step.id)
        run = entry.execution
        steps.append(
            PlanStep(
                id=step.id,
                description=step.description,
                kind=step.kind.value,
                tool=step.tool,
                parameters=dict(step.parameters),
                risk=effective_risk(step).value,
                options=list(step.options) if step.options is not None else None,
                step_hash=taskflow.step_hash(step),
                state=entry.state.value if entry.state else None,
                deadline=entry.deadline,
                escalations=entry.escalations,
                required_approvals=taskflow.required_approvals(task, step, org_policy),
                approvals=[a.to_wire() for a in entry.approvals],
                decision=entry.decision.to_wire() if entry.decision else None,
                execution=StepExecution(
                    state=run.state.value,
                    attempt=run.attempt,
                    started_at=run.started_at,
                    finished_at=run.finished_at,
                    result_summary=dict(run.result) if run.result is not None else None,
                    error=run.error,
                )
                if run is not None
                else None,
                resolution=entry.resolution.to_wire() if entry.resolution else None,
                tool_definition=pins.get(step.id),
                retry_safe=catalog.retry_safe(
                    step.tool, taskflow.effective_parameters(step, entry).get("action")
                ),
            )
        )
    return steps


async def _thread(session: AsyncSession, task: AgenticTask, org_id: uuid.UUID) -> Thread | None:
    raw = task.spec.conversation_id
    if not raw:
        return None
    return await conversation_thread(session, uuid.UUID(raw), org_id)


async def conversation_thread(
    session: AsyncSession, conversation_id: uuid.UUID, org_id: uuid.UUID
) -> Thread | None:
    """The conversation's last messages, redacted (None for one the org does not have);
    also the thread of a draft reply in the queue."""
    repo = ConversationRepository(session)
    conversation = await repo.get_in(conversation_id, {org_id})
    if conversation is None:
        return None
    counts: Counter[str] = Counter()
    messages = []
    for message in await repo.messages(conversation.id, THREAD_MESSAGES):
        content, found = redact(message.content)
        author, found_in_author = redact(message.author)
        counts += found + found_in_author
        messages.append(
            ThreadMessage(
                id=message.id,
                role=message.role,
                author=author,
                content=content,
                created_at=message.created_at,
            )
        )
    subject, found = redact(conversation.subject)
    counts += found
    return Thread(id=conversation.id, subject=subject, messages=messages, redactions=dict(counts))


async def detail(
    session: AsyncSession,
    kube: KubeClient,
    principal: Principal,
    index: DecisionIndex | None,
    *,
    namespace: str,
    name: str,
    step_id: str,
    near: timedelta,
    claim_lease_seconds: float,
) -> HumanTaskDetail:
    """The detail view of `<namespace>/<name>/<step_id>`; 404 outside the caller's orgs."""
    org = await org_of_namespace(session, principal, namespace, index.orgs if index else None)
    task, archived = await read_or_archived(session, kube, org, name)
    step = task.step(step_id)
    if step is None:
        raise NotFound("no such human task")
    now = datetime.now(UTC)
    entry = task.current_status().step(step_id)
    status = _status(task, step_id, now)
    task_id = f"{namespace}/{name}"
    return HumanTaskDetail(
        id=f"{task_id}/{step_id}",
        task_id=task_id,
        run_id=task.metadata.uid or "",
        org_id=org.id,
        workflow=task.spec.agent_ref.name,
        prompt=task.spec.description,
        requested_by=requester_of(task),
        step_id=step_id,
        risk=effective_risk(step).value,
        status=status,  # type: ignore[arg-type]
        phase=phase_of(task, now).value,
        deadline=entry.deadline,
        near_deadline=status in ("pending", "escalated")
        and entry.deadline is not None
        and entry.deadline - now <= near,
        escalations=entry.escalations,
        archived=archived,
        plan=_plan(
            task,
            await OrgRepository(session).policy(org.id),
            await pinned_definitions(session, org.id, task.spec.steps),
        ),
        conversation=await _thread(session, task, org.id),
        revision=await _revision(session, kube, org, task),
        unknown_outcome=await unknown_outcome(session, org.id, task, step_id, claim_lease_seconds)
        if status == "outcome_unknown"
        else None,
    )


# --- the revision loop: a revised plan against the rejected one ---------------------------


async def _revision(
    session: AsyncSession, kube: KubeClient, org: OrgRef, task: AgenticTask
) -> RevisionRead | None:
    """What the task's plan changed against the plan it revises (None for an original, or
    when the rejected task is gone from the API server and the archive)."""
    if not task.spec.revision_of:
        return None
    try:
        before, _ = await read_or_archived(session, kube, org, task.spec.revision_of)
    except NotFound:
        return None
    diff = plan_diff(before.spec.steps, task.spec.steps)
    feedback = next(
        (
            e.decision.feedback
            for e in before.current_status().steps
            if e.decision is not None and e.decision.verdict is Verdict.REJECT
        ),
        None,
    )

    def changes(values: dict[str, tuple[Any, Any]]) -> dict[str, ValueChange]:
        return {k: ValueChange(before=b, after=a) for k, (b, a) in values.items()}

    return RevisionRead(
        revision_of=f"{before.metadata.namespace}/{before.metadata.name}",
        feedback=feedback,
        added=list(diff.added),
        removed=list(diff.removed),
        changed=[
            StepChangeRead(
                step_id=c.step_id, fields=changes(c.fields), parameters=changes(c.parameters)
            )
            for c in diff.changed
        ],
    )


# --- bulk resume ---------------------------------------------------------------------------


def request_hash(body: BulkResumeBody) -> str:
    return hashlib.sha256(
        taskflow.canonical_json(
            {"ids": list(body.ids), "action": body.action, "feedback": body.feedback}
        )
    ).hexdigest()


def item_key(username: str, batch_key: str, item_id: str) -> str:
    """The idempotency key the decision on one item of a keyed batch carries."""
    digest = hashlib.sha256(f"{username}\n{batch_key}\n{item_id}".encode()).hexdigest()
    return f"bulk-{digest[:40]}"


async def _stored(
    sessions: async_sessionmaker[AsyncSession], username: str, key: str
) -> AuditRecord | None:
    async with sessions() as session:
        found = await session.execute(
            select(AuditRecord)
            .where(
                AuditRecord.action == BULK_ACTION,
                AuditRecord.actor == username,
                AuditRecord.details["idempotency_key"].as_string() == key,
            )
            .order_by(AuditRecord.id)
            .limit(1)
        )
        return found.scalars().first()


async def _one(
    sessions: async_sessionmaker[AsyncSession],
    decider: DecisionService,
    kube: KubeClient,
    principal: Principal,
    body: BulkResumeBody,
    item_id: str,
    key: str,
    gate: asyncio.Semaphore,
) -> BulkItem:
    namespace, name, step_id = item_id.split("/", 2)
    try:
        async with gate, sessions() as session, session.begin():
            ballot = Ballot(
                namespace, name, step_id, Verdict(body.action), body.feedback, None, key
            )
            await decider.decide(session, kube, principal, ballot)
    except (PlatformError, KubeError) as exc:
        error = from_core(exc)
        return BulkItem(id=item_id, ok=False, code=error.code, message=error.message)
    return BulkItem(id=item_id, ok=True)


def _answer(results: list[BulkItem], idempotency_key: str | None) -> dict[str, Any]:
    """The batch's answer (JSON): each item's result, the counts and the failures by code."""
    failures: dict[str, list[str]] = {}
    for item in results:
        if not item.ok:
            failures.setdefault(item.code or "error", []).append(item.id)
    succeeded = sum(item.ok for item in results)
    failed = len(results) - succeeded
    return BulkResumeRead(
        results=list(results),
        succeeded=succeeded,
        failed=failed,
        summary=f"{succeeded} succeeded / {failed} failed",
        failures=failures,
        idempotency_key=idempotency_key,
    ).model_dump(mode="json")


async def bulk_resume(
    sessions: async_sessionmaker[AsyncSession],
    decider: DecisionService,
    kube: KubeClient,
    principal: Principal,
    body: BulkResumeBody,
    idempotency_key: str | None,
) -> dict[str, Any]:
    """Decide every item of `body` (see the module docstring); the answer's JSON."""
    digest = request_hash(body)
    if idempotency_key is not None:
        stored = await _stored(sessions, principal.username, idempotency_key)
        if stored is not None:
            if stored.details.get("request_hash") != digest:
                raise IdempotencyConflict(
                    "this idempotency key was already used for a different batch"
                )
            answer: dict[str, Any] = stored.details["response"]
            return answer
    gate = asyncio.Semaphore(BULK_CONCURRENCY)
    keys = {
        item: item_key(principal.username, idempotency_key, item)
        if idempotency_key is not None
        else uuid.uuid4().hex
        for item in body.ids
    }
    results = await asyncio.gather(
        *(
            _one(sessions, decider, kube, principal, body, item, keys[item], gate)
            for item in body.ids
        )
    )
    response = _answer(results, idempotency_key)
    async with sessions() as session, session.begin():
        await record(
            session,
            actor=principal.username,
            action=BULK_ACTION,
            target="human-tasks",
            details={
                "idempotency_key": idempotency_key,
                "request_hash": digest,
                "action": body.action,
                "summary": response["summary"],
                "response": response,
            },
        )
    return response
