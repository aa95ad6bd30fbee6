"""The decision service: record an expert's verdict on a step of a task.

Deciding reads the task, applies the contract's rules (`taskflow.decide`) and writes the
platform's part of the status by server-side apply with the resourceVersion it read as a
precondition. When another writer changed the task in between (the operator's tick, or
another expert), the write is refused and the decision is re-read and re-checked, a few
times at most (the one write of every move, `steps.write`): of two experts deciding the
same step at once, one records the decision and the other is told `run_state_conflict`;
nothing is ever overwritten. Each decision
written is audited in the org's chain (who, what, when, idempotency key).

One `DecisionService` is built by the app (`Decider` hands it to a route) and holds what every
decision needs: the session factory (a refused self-approval is audited in a transaction of
its own), the retry budget and the watch's decision index.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, Protocol

from fastapi import Depends
from pydantic import JsonValue
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from humanwork_core import taskflow, tracing
from humanwork_core.policy import OrgPolicy
from humanwork_core.resources import (
    AgenticTask,
    AgenticTaskStatus,
    Decision,
    ObjectMeta,
    Step,
    StepStatus,
    Verdict,
)
from platform_api.corrections import service as corrections
from platform_api.errors import IdempotencyConflict, NotFound, OrgDeactivated, SelfApproval
from platform_api.floor.accounts import OrgOfPath
from platform_api.floor.audit.service import carries_key
from platform_api.floor.principal import Principal
from platform_api.kube.client import KubeClient
from platform_api.mcp_servers.pins import require_known_definition
from platform_api.orgs.repository import OrgRepository, stored_policy
from platform_api.slots import Slot
from platform_api.steps.audit import MoveRecord, audit, audit_refusal
from platform_api.steps.refusals import Answer
from platform_api.steps.write import StepWrite, write_move
from platform_api.tasks.autocommit import together
from platform_api.tasks.orgs import OrgDirectory, OrgRef
from platform_api.tasks.requester import is_requester
from platform_api.tasks.schemas import TaskRead
from platform_api.tasks.service import org_of_namespace, read_model, read_task

if TYPE_CHECKING:
    pass


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
class _Judged:
    """What the pass the write kept judged: the contract's request and the approvals the
    step needs."""

    request: taskflow.DecisionRequest | None = None
    required: int = 0


@dataclass(frozen=True)
class _Attempt:
    """The task the decision was judged on, as written (or found already recorded)."""

    task: AgenticTask
    request: taskflow.DecisionRequest
    before: AgenticTaskStatus
    after: AgenticTaskStatus
    required: int
    now: datetime


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
        self,
        session: AsyncSession,
        kube: KubeClient,
        principal: Principal,
        ballot: Ballot,
        known: OrgOfPath | None = None,
    ) -> Outcome:
        """Record `principal`'s `ballot`. The first attempt starts from the version of the
        task the watch saw last (no read from the API server); when that version is stale,
        the write's resourceVersion precondition fails and the task is read afresh, without
        counting against `retries`. `known`: the org of the ballot's namespace as the
        caller's statement of this request read it (`Deciding.org`), used for its policy
        and active flag when it is the org found here; else they are read now."""
        orgs = self.index.orgs if self.index is not None else None
        org = await org_of_namespace(session, principal, ballot.namespace, orgs)
        org_policy = await _policy_if_active(session, org, known)
        now = datetime.now(UTC)
        judged = _Judged()

        async def check(task: AgenticTask) -> None:
            await self._check(session, principal, ballot, org, task)

        def move(task: AgenticTask) -> AgenticTaskStatus:
            step = task.step(ballot.step_id)
            assert step is not None  # checked
            judged.request = _request(principal, ballot, step)
            judged.required = taskflow.required_approvals(task, step, org_policy)
            return taskflow.decide(task, ballot.step_id, judged.request, now, org=org_policy)

        how = StepWrite(
            kube,
            ballot.step_id,
            "decision",
            lambda: read_task(kube, org, ballot.name),
            answer=Answer.BY_KIND,
            attempts=self.retries + 1,
            check=check,
            exhausted="the task changed while deciding; read it again",
            faults="decision",
        )
        written = await write_move(how, move, first=self._cached(ballot, org))
        assert judged.request is not None
        attempt = _Attempt(
            written.task,
            judged.request,
            written.task.current_status(),
            written.after,
            judged.required,
            now,
        )
        if written.wire is None:
            replayed = self._replay(attempt, ballot)
            await self._audit_if_missing(session, ballot, org, replayed.recorded)
            return replayed
        with _approval_span(principal, ballot, attempt):
            return await self._recorded(session, principal, ballot, org, attempt, written.wire)

    def _cached(self, ballot: Ballot, org: OrgRef) -> AgenticTask | None:
        if self.index is None:
            return None
        cached = self.index.task(ballot.namespace, ballot.name)
        if cached is not None and cached.spec.org_id != str(org.id):
            return None
        return cached

    async def _check(
        self,
        session: AsyncSession,
        principal: Principal,
        ballot: Ballot,
        org: OrgRef,
        task: AgenticTask,
    ) -> None:
        """404 for a step the plan lacks; 409 for an approval of an MCP tool's step that does
        not pin the definition the platform discovered; 403 (audited) for the requester's own
        approval."""
        step = task.step(ballot.step_id)
        if step is None:
            raise NotFound("the plan has no such step", step_id=ballot.step_id)
        if ballot.verdict.positive:
            entry = task.current_status().step(ballot.step_id)
            parameters = ballot.parameters or taskflow.effective_parameters(step, entry)
            await require_known_definition(
                session, org.id, ballot.step_id, step.tool or "", parameters
            )
        if ballot.verdict.positive and await is_requester(
            session, org.id, task, principal.username
        ):
            await session.rollback()  # the request fails: its connection back before the audit's
            await self._refuse_self_approval(principal, ballot, org)

    async def _refuse_self_approval(
        self, principal: Principal, ballot: Ballot, org: OrgRef
    ) -> None:
        if self.sessions is not None:
            await audit_refusal(
                self.sessions,
                MoveRecord(
                    principal.username,
                    "task.step.self_approval",
                    ballot.namespace,
                    ballot.name,
                    org.id,
                    ballot.step_id,
                    {"idempotency_key": ballot.idempotency_key},
                ),
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
        facts = {
            "verdict": recorded.verdict.value,
            "at": recorded.at.isoformat(),
            "idempotency_key": key,
            "feedback": recorded.feedback,
            "recovered": True,
        }
        await audit(
            session,
            MoveRecord(
                recorded.by, action, ballot.namespace, ballot.name, org.id, ballot.step_id, facts
            ),
        )

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
        model = read_model(_as_written(attempt.task, written), attempt.now)
        facts = {
            "verdict": ballot.verdict.value,
            "at": attempt.now.isoformat(),
            "idempotency_key": ballot.idempotency_key,
            "step_hash": attempt.request.step_hash,
            "decided": entry.decision is not None,
            "approvals": len(entry.approvals),
            "feedback": ballot.feedback,
        }
        action = f"task.step.{ballot.verdict.value}"
        uid = attempt.task.metadata.uid
        move = MoveRecord(
            principal.username,
            action,
            ballot.namespace,
            ballot.name,
            org.id,
            ballot.step_id,
            facts,
            uid,
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
        if made is None:
            await audit(session, move)  # one statement: no transaction around it
        else:
            async with together(session):  # the audit row, the correction and its row
                await audit(session, move)
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


async def _policy_if_active(
    session: AsyncSession, org: OrgRef, known: OrgOfPath | None
) -> OrgPolicy:
    """The org's policy, read fresh in this request: from the caller's statement when it
    read this very org, else by its own read (`OrgRepository.policy_if_active`); 409
    `org_deactivated` for a deactivated org (no decisions)."""
    if known is not None and known.id == org.id:
        policy = None if known.deactivated else stored_policy(known.policy)
    else:
        policy = await OrgRepository(session).policy_if_active(org.id)
    if policy is None:
        raise OrgDeactivated("the org is deactivated", orgId=str(org.id))
    return policy


def _as_written(task: AgenticTask, written: dict[str, Any]) -> AgenticTask:
    """`task` as its status write left it, from the API server's answer: its metadata and
    status parsed, its spec the one judged (not parsed again: the write's resourceVersion
    precondition held, so the object had this very spec, and a status write changes none)."""
    status = written.get("status")
    return task.model_copy(
        update={
            "metadata": ObjectMeta.model_validate(written["metadata"]),
            "status": AgenticTaskStatus.from_wire(status) if status is not None else None,
        }
    )


def _request(principal: Principal, ballot: Ballot, step: Step) -> taskflow.DecisionRequest:
    """The contract's request for `ballot` on `step` (its hash the expert saw, or now's)."""
    return taskflow.DecisionRequest(
        verdict=ballot.verdict,
        by=principal.username,
        step_hash=ballot.step_hash or taskflow.step_hash(step),
        idempotency_key=ballot.idempotency_key,
        feedback=ballot.feedback,
        parameters=ballot.parameters,
        input=ballot.provided,
        selection=ballot.selection,
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


DECIDER: Slot[DecisionService] = Slot("decider")
Decider = Annotated[DecisionService, Depends(DECIDER)]
"""The decision service (built once, with the sessions, retries and decision index)."""
