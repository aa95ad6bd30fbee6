"""The decision service: record an expert's verdict on a step of a task.

Deciding reads the task, applies the contract's rules (`taskflow.decide`) and writes the
platform's part of the status by server-side apply with the resourceVersion it read as a
precondition. When another writer changed the task in between (the operator's tick, or
another expert), the write is refused and the decision is re-read and re-checked, a few
times at most: of two experts deciding the same step at once, one records the decision
and the other is told `run_state_conflict`; nothing is ever overwritten. Each decision
written is audited in the org's chain (who, what, when, idempotency key).

One `DecisionService` is built with the platform (`Platform.decider`) and holds what every
decision needs: the session factory (a refused self-approval is audited in a transaction of
its own), the retry budget and the watch's decision index.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import JsonValue
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from humanwork_core import taskflow, tracing
from humanwork_core.resources import AgenticTask, AgenticTaskStatus, Decision, StepStatus, Verdict
from platform_api import faultpoints
from platform_api.access.principal import Principal
from platform_api.audit.service import carries_key, record, record_detached
from platform_api.corrections import service as corrections
from platform_api.errors import (
    IdempotencyConflict,
    NotFound,
    OrgDeactivated,
    RunStateConflict,
    SelfApproval,
    from_core,
)
from platform_api.kube.client import KubeClient, KubeConflict, KubeInvalid, KubeNotFound
from platform_api.orgs.repository import OrgRepository
from platform_api.tasks.orgs import OrgDirectory, OrgRef
from platform_api.tasks.requester import is_requester
from platform_api.tasks.schemas import TaskRead
from platform_api.tasks.service import org_of_namespace, read_model, read_task

if TYPE_CHECKING:
    from humanwork_core.policy import OrgPolicy


class WatchedTasks(Protocol):
    """What deciding reads from the watch of all AgenticTasks: the org directory and the
    last version of a task seen (`human_tasks.index.DecisionIndex`, which sits above this
    slice, is the one implementation)."""

    @property
    def orgs(self) -> OrgDirectory: ...

    def task(self, namespace: str, name: str) -> AgenticTask | None: ...


@dataclass(frozen=True)
class Ballot:
    """What the expert decides: the step, the verdict and its payload."""

    namespace: str
    name: str
    step_id: str
    verdict: Verdict
    feedback: str | None
    step_hash: str | None
    idempotency_key: str
    parameters: Mapping[str, JsonValue] | None = None
    provided: Mapping[str, JsonValue] | None = None
    selection: str | None = None


@dataclass(frozen=True)
class Outcome:
    """What deciding did: the task as it is now and what was recorded."""

    task: TaskRead
    decided: bool
    approvals: int
    required_approvals: int
    replayed: bool
    recorded: Decision | None = None
    """The approval or decision that carries this request's idempotency key."""


@dataclass
class _Attempt:
    """One pass of the decision loop: the task it judged and where that copy came from."""

    task: AgenticTask
    from_cache: bool
    request: taskflow.DecisionRequest
    before: AgenticTaskStatus
    after: AgenticTaskStatus
    required: int
    now: datetime


class _Retry(Exception):
    """This pass judged a stale copy: read the task again."""


@dataclass(frozen=True)
class DecisionService:
    """Records experts' decisions (see the module docstring); built once per platform."""

    sessions: async_sessionmaker[AsyncSession] | None
    retries: int
    index: WatchedTasks | None = None
    pusher: corrections.CorrectionPusher | None = None
    """Pushes the corrections a decision makes to the org's agents."""
    on_decided: Callable[[str], None] | None = None
    """Told the verdict of every decision written (the platform's metrics)."""

    async def decide(
        self, session: AsyncSession, kube: KubeClient, principal: Principal, ballot: Ballot
    ) -> Outcome:
        """Record `principal`'s `ballot`. The first attempt starts from the version of the
        task the watch saw last (no read from the API server); when that version is stale,
        the write's resourceVersion precondition fails and the task is read afresh, without
        counting against `retries`."""
        orgs = self.index.orgs if self.index is not None else None
        org = await org_of_namespace(session, principal, ballot.namespace, orgs)
        org_policy = await OrgRepository(session).policy_if_active(org.id)
        if org_policy is None:  # no decisions
            raise OrgDeactivated("the org is deactivated", orgId=str(org.id))
        cached = self._cached(ballot, org)
        conflicts = 0
        while True:
            try:
                attempt = await self._judge(
                    session, kube, principal, ballot, org, org_policy, cached
                )
            except _Retry:
                cached = None
                continue
            cached = None
            if attempt.after == attempt.before:
                replayed = self._replay(attempt, ballot)
                await self._audit_if_missing(session, ballot, org, replayed.recorded)
                return replayed
            try:
                written = await self._write(kube, ballot, attempt)
            except _Retry:
                if not attempt.from_cache:
                    conflicts += 1
                    if conflicts > self.retries:
                        raise RunStateConflict(
                            "the task changed while deciding; read it again",
                            step_id=ballot.step_id,
                        ) from None
                continue
            with _approval_span(principal, ballot, attempt):
                return await self._recorded(session, principal, ballot, org, attempt, written)

    def _cached(self, ballot: Ballot, org: OrgRef) -> AgenticTask | None:
        if self.index is None:
            return None
        cached = self.index.task(ballot.namespace, ballot.name)
        if cached is not None and cached.spec.org_id != str(org.id):
            return None
        return cached

    async def _judge(
        self,
        session: AsyncSession,
        kube: KubeClient,
        principal: Principal,
        ballot: Ballot,
        org: OrgRef,
        org_policy: OrgPolicy,
        cached: AgenticTask | None,
    ) -> _Attempt:
        """The contract's verdict on the ballot against the cached or current task; a
        refusal judged on the cached copy retries on the current one."""
        from_cache = cached is not None
        task = cached if cached is not None else await read_task(kube, org, ballot.name)
        step = task.step(ballot.step_id)
        if step is None:
            raise NotFound("the plan has no such step", step_id=ballot.step_id)
        if ballot.verdict.positive and await is_requester(
            session, org.id, task, principal.username
        ):
            await session.rollback()  # the request fails: its connection back before the audit's
            await self._refuse_self_approval(principal, ballot, org)
        request = taskflow.DecisionRequest(
            verdict=ballot.verdict,
            by=principal.username,
            step_hash=ballot.step_hash or taskflow.step_hash(step),
            idempotency_key=ballot.idempotency_key,
            feedback=ballot.feedback,
            parameters=ballot.parameters,
            input=ballot.provided,
            selection=ballot.selection,
        )
        now = datetime.now(UTC)
        before = task.current_status()
        try:
            after = taskflow.decide(task, ballot.step_id, request, now, org=org_policy)
        except taskflow.TaskFlowError as exc:
            if from_cache:  # the watch's copy may lag: judge on the current version
                raise _Retry from None
            raise from_core(exc) from None
        if after == before and from_cache:
            raise _Retry  # a replay is answered from the current version
        required = taskflow.required_approvals(task, step, org_policy)
        return _Attempt(task, from_cache, request, before, after, required, now)

    async def _refuse_self_approval(
        self, principal: Principal, ballot: Ballot, org: OrgRef
    ) -> None:
        if self.sessions is not None:
            await record_detached(
                self.sessions,
                actor=principal.username,
                action="task.step.self_approval",
                target=f"agentictask:{ballot.namespace}/{ballot.name}",
                org_id=org.id,
                details={"step_id": ballot.step_id, "idempotency_key": ballot.idempotency_key},
            )
        raise SelfApproval(
            "the requester of a task cannot approve its steps", step_id=ballot.step_id
        )

    def _replay(self, attempt: _Attempt, ballot: Ballot) -> Outcome:
        """The answer to a retry of a decision already recorded."""
        entry = attempt.before.step(ballot.step_id)
        recorded = [*entry.approvals, *([entry.decision] if entry.decision else [])]
        if any(
            d.idempotency_key == ballot.idempotency_key and d.feedback != ballot.feedback
            for d in recorded
        ):
            raise IdempotencyConflict(
                "this idempotency key was already used for a different decision",
                step_id=ballot.step_id,
            )
        return Outcome(
            read_model(attempt.task, attempt.now),
            entry.decision is not None,
            len(entry.approvals),
            attempt.required,
            True,
            _carrying(entry, ballot.idempotency_key),
        )

    async def _audit_if_missing(
        self, session: AsyncSession, ballot: Ballot, org: OrgRef, recorded: Decision | None
    ) -> None:
        """A replayed decision whose audit row is missing (the process that wrote it to the
        task's status died before its transaction committed) is audited now, as recovered."""
        if recorded is None:
            return
        action = f"task.step.{recorded.verdict.value}"
        target = f"agentictask:{ballot.namespace}/{ballot.name}"
        key = ballot.idempotency_key
        if await carries_key(session, org_id=org.id, action=action, target=target, key=key):
            return
        details = {"step_id": ballot.step_id, "verdict": recorded.verdict.value}
        await record(
            session,
            actor=recorded.by,
            action=action,
            target=target,
            org_id=org.id,
            details={
                **details,
                "at": recorded.at.isoformat(),
                "idempotency_key": key,
                "feedback": recorded.feedback,
                "recovered": True,
            },
        )

    async def _write(self, kube: KubeClient, ballot: Ballot, attempt: _Attempt) -> dict[str, Any]:
        """Apply the platform's part of the status under the resourceVersion judged;
        `_Retry` when another writer changed the task meanwhile."""
        faultpoints.reach("decision.before_status_write")
        try:
            written = await kube.apply_task_status(
                ballot.namespace,
                ballot.name,
                attempt.task.metadata.resource_version or "",
                taskflow.owned_status(attempt.after, taskflow.Writer.PLATFORM_API),
            )
            faultpoints.reach("decision.after_status_write")
            return written
        except KubeConflict:
            raise _Retry from None
        except KubeNotFound:
            raise NotFound("no such task") from None
        except KubeInvalid as exc:
            raise RunStateConflict(
                "the API server refused the decision", step_id=ballot.step_id, reason=exc.message
            ) from None

    async def _recorded(
        self,
        session: AsyncSession,
        principal: Principal,
        ballot: Ballot,
        org: OrgRef,
        attempt: _Attempt,
        written: dict[str, Any],
    ) -> Outcome:
        """Audit the decision written and answer with the task as the write left it."""
        entry = attempt.after.step(ballot.step_id)
        model = read_model(AgenticTask.from_wire(written), attempt.now)
        await record(
            session,
            actor=principal.username,
            action=f"task.step.{ballot.verdict.value}",
            target=f"agentictask:{ballot.namespace}/{ballot.name}",
            org_id=org.id,
            details={
                "step_id": ballot.step_id,
                "verdict": ballot.verdict.value,
                "at": attempt.now.isoformat(),
                "idempotency_key": ballot.idempotency_key,
                "step_hash": attempt.request.step_hash,
                "decided": entry.decision is not None,
                "approvals": len(entry.approvals),
                "feedback": ballot.feedback,
                "uid": attempt.task.metadata.uid,
            },
        )
        # an edit of a step's parameters, or a rejection's feedback, is a correction
        made = corrections.step_correction(
            attempt.task,
            ballot.step_id,
            ballot.verdict,
            parameters=ballot.parameters,
            feedback=ballot.feedback,
            by=principal.username,
        )
        if made is not None:
            await corrections.keep(session, made)
            if self.pusher is not None:
                self.pusher.soon(org.id, [made])
        if self.on_decided is not None:
            self.on_decided(ballot.verdict.value)
        return Outcome(
            model,
            entry.decision is not None,
            len(entry.approvals),
            attempt.required,
            False,
            _carrying(entry, ballot.idempotency_key),
        )


@contextlib.contextmanager
def _approval_span(principal: Principal, ballot: Ballot, attempt: _Attempt) -> Iterator[None]:
    """`humanwork.approval` (who decided which step, how) in the task's trace, from the
    moment the step became decidable, with that wait as its own span
    (`humanwork.wait_for_human`); nothing when tracing is off."""
    task = attempt.task
    parent = tracing.context_from_annotations(task.metadata.annotations)
    if not tracing.enabled():
        yield
        return
    waited_from = _decidable_since(task, ballot.step_id) or attempt.now
    attributes = {
        "humanwork.task": f"{ballot.namespace}/{ballot.name}",
        "humanwork.step.id": ballot.step_id,
        "humanwork.decision.verdict": ballot.verdict.value,
        "humanwork.decision.by": principal.username,
    }
    with tracing.span("humanwork.approval", attributes, parent=parent, start=waited_from):
        with tracing.span(
            "humanwork.wait_for_human", {"humanwork.step.id": ballot.step_id}, start=waited_from
        ):
            pass
        yield


def _decidable_since(task: AgenticTask, step_id: str) -> datetime | None:
    """When the step became decidable: the task's creation for the first step, else the
    end of the previous step's execution (or its decision)."""
    previous = None
    for step in task.spec.steps:
        if step.id == step_id:
            break
        previous = step.id
    if previous is None:
        return task.metadata.creation_timestamp
    entry = task.current_status().step(previous)
    if entry.execution is not None and entry.execution.finished_at is not None:
        return entry.execution.finished_at
    return entry.decision.at if entry.decision is not None else None


def _carrying(entry: StepStatus, idempotency_key: str) -> Decision | None:
    for decision in (*entry.approvals, entry.decision):
        if decision is not None and decision.idempotency_key == idempotency_key:
            return decision
    return None
