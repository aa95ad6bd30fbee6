"""The rules of an AgenticTask's life: the one place every writer takes them from.

Pure functions over the resource models; the current time is always an argument. Each
writer calls the function for its own move and writes only the fields it owns:

- the platform API: :func:`decide` and :func:`auto_approve` (step `approvals` and
  `decision`), and :func:`authorize_tool_call` before it runs a tool for the agent;
- the agent: :func:`start_execution` and :func:`finish_execution` (step `execution`);
- the operator: :func:`tick` and :func:`cancel` (phase, step states, deadlines,
  escalations, current step, highest pending risk, next deadline, timestamps).

:func:`owned_status` cuts a writer's part out of a status for its server-side apply; the
admission policies in manifests/base/policies/ enforce the same partition.

The rules: only the first undecided step can be decided, and only once every earlier step
executed; a rejection halts the task; a step needs as many approvals from distinct experts
as its risk requires (a decision is recorded once, never changed); only low and medium
risk read-only actions auto-approve, and only where the org opted in and the task asks
(:mod:`humanwork_core.policy`; none by default); a step's risk is never below the action
catalog's minimum for its action (:func:`humanwork_core.policy.effective_risk`); a missed deadline
escalates (the step stays decidable with a new deadline) until the budget is spent, then
the step and the task expire; a step executes only when approved and after every earlier
step executed; terminal phases never change. A decision is bound to the exact step the
expert saw by :func:`step_hash`.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from pydantic import JsonValue

from .errors import HumanworkError
from .policy import OrgPolicy, auto_approves, effective_risk
from .policy import required_approvals as _quorum
from .resources import (
    AgenticTask,
    AgenticTaskStatus,
    Decision,
    Execution,
    ExecutionState,
    Risk,
    Step,
    StepKind,
    StepState,
    StepStatus,
    TaskPhase,
    TaskPolicy,
    Verdict,
)
from .resources.agentictask import Outcome, Resolution

AUTO_APPROVER = "policy:auto-approve"
"""The `by` of decisions made by the task's auto-approval policy (reserved for it)."""

MAX_ATTEMPTS = 100


class Writer(StrEnum):
    """The three components that write an AgenticTask's status, each its own fields."""

    PLATFORM_API = "platform-api"
    AGENT = "agent"
    OPERATOR = "operator"


OPERATOR_STATUS_FIELDS = (
    "phase",
    "currentStep",
    "highestPendingRisk",
    "nextDeadline",
    "conditions",
    "observedGeneration",
    "startedAt",
    "completedAt",
)
"""Top-level status fields (wire names) only the operator writes."""

STEP_FIELDS: Mapping[Writer, tuple[str, ...]] = {
    Writer.PLATFORM_API: ("approvals", "decision", "resolution"),
    Writer.AGENT: ("execution",),
    Writer.OPERATOR: ("state", "deadline", "escalations"),
}
"""Fields of each status.steps entry (wire names) and who writes them; `id` is the key."""


# --- errors --------------------------------------------------------------------------------


class TaskFlowError(HumanworkError):
    """A move the task's rules do not allow; `code` says which rule."""

    code = "task_flow_error"

    def __init__(self, message: str, *, step_id: str | None = None) -> None:
        details = {"stepId": step_id} if step_id is not None else {}
        super().__init__(message, **details)
        self.step_id = step_id


class TaskTerminal(TaskFlowError):
    """The task is Completed, Rejected, Failed, Cancelled or Expired: nothing more happens."""

    code = "task_terminal"


class StepNotFound(TaskFlowError):
    """The plan has no step of that id."""

    code = "step_not_found"


class StepNotDecidable(TaskFlowError):
    """The step is not the first undecided one, or an earlier step has not executed yet."""

    code = "step_not_decidable"


class StepAlreadyDecided(TaskFlowError):
    """The step already has its decision; decisions are never changed."""

    code = "step_already_decided"


class HumanTaskExpired(TaskFlowError):
    """The decision deadline passed and the escalation budget is spent."""

    code = "human_task_expired"


class StepHashMismatch(TaskFlowError):
    """The decision (or approval) was made on a different version of the step."""

    code = "step_hash_mismatch"


class InvalidDecision(TaskFlowError):
    """The verdict does not fit the step (e.g. select on an action) or lacks its payload."""

    code = "invalid_decision"


class EditChangesAction(TaskFlowError):
    """An edit may amend an action's parameters, not swap the action for another one (whose
    risk and quorum the approvers did not weigh): a different action is a new plan."""

    code = "edit_changes_action"


class DuplicateApprover(TaskFlowError):
    """This expert already approved the step; further approvals must come from others."""

    code = "duplicate_approver"


class ApprovalConflict(TaskFlowError):
    """The approval amends the step differently from the approvals already given."""

    code = "approval_conflict"


class IdempotencyConflict(TaskFlowError):
    """The idempotency key was already used for a different decision."""

    code = "idempotency_conflict"


class NotApproved(TaskFlowError):
    """The step has no approving decision (yet, or it was rejected)."""

    code = "not_approved"


class StepNotExecutable(TaskFlowError):
    """An earlier step has not executed yet."""

    code = "step_not_executable"


class ExecutionConflict(TaskFlowError):
    """The execution is not in a state that allows this move (e.g. finishing twice)."""

    code = "execution_conflict"


class NotUnknown(TaskFlowError):
    """Only a step whose outcome is unknown (and not yet resolved) can be resolved."""

    code = "outcome_not_unknown"


class ToolCallMismatch(TaskFlowError):
    """The tool call differs from the approved step (tool or parameters)."""

    code = "tool_call_mismatch"


# --- hashing -------------------------------------------------------------------------------


def _canonical(value: object) -> object:
    """Normalise a JSON value so that equal data always serialises to the same bytes.

    Integral floats become ints: the API server stores 1.0 as 1, and a hash must survive
    a round trip through it.
    """
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("JSON has no NaN or infinity")
        return int(value) if value.is_integer() else value
    if isinstance(value, Mapping):
        return {str(key): _canonical(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(item) for item in value]
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def canonical_json(value: object) -> bytes:
    """Canonical JSON: sorted keys, no whitespace, UTF-8, integral floats as ints."""
    return json.dumps(
        _canonical(value),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    ).encode("utf-8")


def step_hash(step: Step) -> str:
    """SHA-256 (hex) of the canonical JSON of what the expert approves.

    Covers id, description, kind, tool, parameters and risk (and the options of a select
    step), so that a decision cannot be replayed onto a step that says something else.
    """
    payload: dict[str, object] = {
        "id": step.id,
        "description": step.description,
        "kind": step.kind.value,
        "tool": step.tool,
        "parameters": step.parameters,
        "risk": step.risk.value,
    }
    if step.options is not None:
        payload["options"] = list(step.options)
    return hashlib.sha256(canonical_json(payload)).hexdigest()


# --- reading the state ---------------------------------------------------------------------


def required_approvals(task: AgenticTask, step: Step, org: OrgPolicy) -> int:
    """How many distinct experts must approve `step`: the stricter of the org's and the
    task's quorum for the step's effective risk (never below what the org set)."""
    return _quorum(org, task.spec.policy, effective_risk(step))


def is_approved(entry: StepStatus) -> bool:
    """Whether the step has its decision and it lets the step go ahead."""
    return entry.decision is not None and entry.decision.verdict.positive


def is_rejected(entry: StepStatus) -> bool:
    """Whether the step was rejected."""
    return entry.decision is not None and entry.decision.verdict is Verdict.REJECT


def is_executed(entry: StepStatus) -> bool:
    """Whether the step ran to success."""
    return entry.execution is not None and entry.execution.state is ExecutionState.SUCCEEDED


def is_expired(entry: StepStatus, policy: TaskPolicy, now: datetime) -> bool:
    """Whether an undecided step ran out of time: deadline passed, escalations spent."""
    if entry.decision is not None:
        return False
    if entry.state is StepState.EXPIRED:
        return True
    return (
        entry.deadline is not None
        and now >= entry.deadline
        and entry.escalations >= policy.escalation.max_escalations
    )


def _find_step(task: AgenticTask, step_id: str) -> Step:
    step = task.step(step_id)
    if step is None:
        raise StepNotFound(f"the plan has no step {step_id!r}", step_id=step_id)
    return step


def _earlier_executed(task: AgenticTask, step_id: str) -> bool:
    status = task.current_status()
    for step in task.spec.steps:
        if step.id == step_id:
            return True
        if not is_executed(status.step(step.id)):
            return False
    return False


def decidable_step(task: AgenticTask) -> Step | None:
    """The step a decision may be made on now: the first undecided step, provided every
    earlier step executed; None when the task waits for the agent, halted or finished.

    Time is not considered here; :func:`decide` also refuses an expired step.
    """
    status = task.current_status()
    if status.phase is not None and status.phase.terminal:
        return None
    for step in task.spec.steps:
        entry = status.step(step.id)
        if entry.decision is None:
            return step
        if not is_executed(entry):
            return None
    return None


def executable_step(task: AgenticTask) -> Step | None:
    """The step the agent may run now: approved, not finished, every earlier one executed."""
    status = task.current_status()
    if status.phase is not None and status.phase.terminal:
        return None
    for step in task.spec.steps:
        entry = status.step(step.id)
        if is_executed(entry):
            continue
        if is_approved(entry) and (
            entry.execution is None
            or entry.execution.state is ExecutionState.RUNNING
            or is_resolved(entry)
        ):
            return step
        return None
    return None


def is_outcome_unknown(entry: StepStatus) -> bool:
    """Whether the step's tool call may or may not have taken effect (an expert decides)."""
    return entry.execution is not None and entry.execution.state is ExecutionState.OUTCOME_UNKNOWN


def awaiting_resolution(task: AgenticTask) -> Step | None:
    """The step whose unknown outcome waits for an expert's resolution, if any."""
    status = task.current_status()
    if status.phase is not None and status.phase.terminal:
        return None
    for step in task.spec.steps:
        entry = status.step(step.id)
        if is_outcome_unknown(entry) and not is_resolved(entry):
            return step
    return None


def is_resolved(entry: StepStatus) -> bool:
    """Whether an expert resolved the step's current unknown outcome (the agent then runs
    it again: the proxy replays `applied`, or calls once more after `not_applied`)."""
    return (
        is_outcome_unknown(entry)
        and entry.resolution is not None
        and entry.execution is not None
        and entry.resolution.attempt == entry.execution.attempt
    )


def derive_phase(task: AgenticTask, now: datetime) -> TaskPhase:
    """The phase the task is in, from its decisions, executions and the time.

    A terminal phase already recorded is kept: terminal phases are absorbing.
    """
    status = task.current_status()
    if status.phase is not None and status.phase.terminal:
        return status.phase
    for step in task.spec.steps:
        entry = status.step(step.id)
        if is_rejected(entry):
            return TaskPhase.REJECTED
        if entry.execution is not None:
            if entry.execution.state is ExecutionState.FAILED:
                return TaskPhase.FAILED
            if entry.execution.state is ExecutionState.RUNNING or is_resolved(entry):
                return TaskPhase.IN_PROGRESS
            if entry.execution.state is ExecutionState.OUTCOME_UNKNOWN:
                return TaskPhase.PENDING_APPROVAL  # waits for an expert's resolution
            continue
        if entry.decision is not None:
            return TaskPhase.IN_PROGRESS
        if is_expired(entry, task.spec.policy, now):
            return TaskPhase.EXPIRED
        return TaskPhase.PENDING_APPROVAL
    return TaskPhase.COMPLETED


def current_step(task: AgenticTask) -> str | None:
    """Id of the first step not yet executed; None when every step executed."""
    status = task.current_status()
    return next((s.id for s in task.spec.steps if not is_executed(status.step(s.id))), None)


def highest_pending_risk(task: AgenticTask, now: datetime) -> Risk | None:
    """The highest risk among the steps still ahead; None once the task is terminal."""
    if derive_phase(task, now).terminal:
        return None
    status = task.current_status()
    pending = [effective_risk(s) for s in task.spec.steps if not is_executed(status.step(s.id))]
    return max(pending, key=lambda risk: risk.rank) if pending else None


def step_state(task: AgenticTask, step_id: str, now: datetime) -> StepState:
    """The lifecycle state of one step (what the operator writes into `state`)."""
    _find_step(task, step_id)
    entry = task.current_status().step(step_id)
    if is_rejected(entry):
        return StepState.REJECTED
    if entry.execution is not None:
        return {
            ExecutionState.RUNNING: StepState.EXECUTING,
            ExecutionState.SUCCEEDED: StepState.EXECUTED,
            ExecutionState.FAILED: StepState.FAILED,
            ExecutionState.OUTCOME_UNKNOWN: StepState.OUTCOME_UNKNOWN,
        }[entry.execution.state]
    if entry.decision is not None:
        return StepState.APPROVED
    if is_expired(entry, task.spec.policy, now):
        return StepState.EXPIRED
    if entry.escalations > 0:
        return StepState.ESCALATED
    return StepState.PENDING


def effective_parameters(step: Step, entry: StepStatus) -> dict[str, JsonValue]:
    """The parameters the tool runs with: the expert's amendment if any, else the plan's."""
    if entry.decision is not None and entry.decision.parameters is not None:
        return dict(entry.decision.parameters)
    return dict(step.parameters)


# --- the platform API's moves --------------------------------------------------------------


@dataclass(frozen=True)
class DecisionRequest:
    """What an expert submits for a step."""

    verdict: Verdict
    by: str
    step_hash: str
    idempotency_key: str
    feedback: str | None = None
    parameters: Mapping[str, JsonValue] | None = None
    input: Mapping[str, JsonValue] | None = None
    selection: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "verdict", Verdict(self.verdict))

    def to_decision(self, at: datetime) -> Decision:
        """The decision record this request makes at time `at`."""
        return Decision(
            verdict=self.verdict,
            by=self.by,
            at=at,
            feedback=self.feedback,
            parameters=dict(self.parameters) if self.parameters is not None else None,
            input=dict(self.input) if self.input is not None else None,
            selection=self.selection,
            idempotency_key=self.idempotency_key,
            step_hash=self.step_hash,
        )


def _payload(decision: Decision | DecisionRequest) -> tuple[object, ...]:
    """What an approval amends; all approvals of a step must agree on it."""
    return (
        decision.verdict,
        canonical_json(decision.parameters) if decision.parameters is not None else None,
        canonical_json(decision.input) if decision.input is not None else None,
        decision.selection,
    )


def _replay(entry: StepStatus, request: DecisionRequest) -> bool:
    """True when the request repeats one already recorded (a retry); raises when its
    idempotency key was used for something else."""
    recorded = list(entry.approvals)
    if entry.decision is not None:
        recorded.append(entry.decision)
    for earlier in recorded:
        if earlier.idempotency_key != request.idempotency_key:
            continue
        if (
            earlier.by == request.by
            and earlier.step_hash == request.step_hash
            and _payload(earlier) == _payload(request)
        ):
            return True
        raise IdempotencyConflict(
            "this idempotency key was already used for a different decision",
            step_id=entry.id,
        )
    return False


def _check_verdict(step: Step, request: DecisionRequest) -> None:
    verdict = request.verdict
    allowed = {
        StepKind.ACTION: {Verdict.APPROVE, Verdict.EDIT, Verdict.REJECT},
        StepKind.INPUT: {Verdict.PROVIDE, Verdict.SELECT, Verdict.REJECT},
    }[step.kind]
    if verdict not in allowed:
        names = ", ".join(sorted(v.value for v in allowed))
        raise InvalidDecision(
            f"a {step.kind.value} step takes one of: {names}; not {verdict.value}", step_id=step.id
        )
    if verdict is Verdict.EDIT and request.parameters is None:
        raise InvalidDecision("an edit carries the amended parameters", step_id=step.id)
    edited = request.parameters
    if (
        verdict is Verdict.EDIT
        and edited is not None
        and (edited.get("action") != step.parameters.get("action"))
    ):
        raise EditChangesAction(
            "an edit keeps the step's action; a different action needs a new plan",
            step_id=step.id,
        )
    if verdict is Verdict.PROVIDE:
        if step.options is not None:
            raise InvalidDecision(
                "this input step offers options: select one of them", step_id=step.id
            )
        if request.input is None:
            raise InvalidDecision("a provide decision carries the input", step_id=step.id)
    if verdict is Verdict.SELECT:
        if step.options is None:
            raise InvalidDecision("this input step offers no options to select", step_id=step.id)
        if request.selection not in step.options:
            raise InvalidDecision(
                f"{request.selection!r} is not one of the step's options", step_id=step.id
            )


def decide(
    task: AgenticTask,
    step_id: str,
    request: DecisionRequest,
    now: datetime,
    *,
    org: OrgPolicy,
) -> AgenticTaskStatus:
    """Record an expert's decision on a step; returns the new status.

    Only `approvals` and `decision` of that step change. A retry with the same
    idempotency key returns the status unchanged. A rejection is the decision at once; a
    positive verdict is recorded as an approval, and becomes the decision when the
    step has the distinct approvers :func:`required_approvals` asks for (the org's
    policy and the task's, for the step's effective risk).
    """
    step = _find_step(task, step_id)
    status = task.current_status()
    entry = status.step(step_id)
    if _replay(entry, request):
        return status
    if request.by == AUTO_APPROVER:
        raise InvalidDecision(f"{AUTO_APPROVER} is reserved for the policy", step_id=step_id)

    phase = derive_phase(task, now)
    if phase is TaskPhase.EXPIRED:
        raise HumanTaskExpired("the task expired waiting for a decision", step_id=step_id)
    if phase.terminal:
        raise TaskTerminal(f"the task is {phase.value}", step_id=step_id)
    if entry.decision is not None:
        raise StepAlreadyDecided("the step already has its decision", step_id=step_id)
    decidable = decidable_step(task)
    if decidable is None or decidable.id != step_id:
        raise StepNotDecidable(
            "only the first undecided step can be decided, after every earlier step executed",
            step_id=step_id,
        )
    if is_expired(entry, task.spec.policy, now):
        raise HumanTaskExpired("the decision deadline passed", step_id=step_id)
    if request.step_hash != step_hash(step):
        raise StepHashMismatch(
            "the decision was made on a different version of the step", step_id=step_id
        )
    _check_verdict(step, request)

    decision = request.to_decision(now)
    if not request.verdict.positive:
        return status.with_step(entry.model_copy(update={"decision": decision}))

    if any(a.by == request.by for a in entry.approvals):
        raise DuplicateApprover(
            f"{request.by} already approved this step; another expert must approve",
            step_id=step_id,
        )
    if entry.approvals and _payload(entry.approvals[0]) != _payload(request):
        raise ApprovalConflict(
            "the approvals of a step must agree on the verdict and on what it amends",
            step_id=step_id,
        )
    approvals = (*entry.approvals, decision)
    update: dict[str, object] = {"approvals": approvals}
    if len(approvals) >= required_approvals(task, step, org):
        update["decision"] = decision
    return status.with_step(entry.model_copy(update=update))


def auto_approve(task: AgenticTask, now: datetime, *, org: OrgPolicy) -> AgenticTaskStatus | None:
    """The status with the decidable step approved by policy, or None when the policies do
    not cover it (:func:`humanwork_core.policy.auto_approves`: a read-only action of the
    catalog, effective risk low, the org opted in and the task asks for it)."""
    step = decidable_step(task)
    if step is None or not auto_approves(org, task.spec.policy, step):
        return None
    status = task.current_status()
    entry = status.step(step.id)
    if entry.approvals or is_expired(entry, task.spec.policy, now):
        return None
    digest = step_hash(step)
    decision = Decision(
        verdict=Verdict.APPROVE,
        by=AUTO_APPROVER,
        at=now,
        idempotency_key=f"auto-approve:{digest[:32]}",
        step_hash=digest,
    )
    return status.with_step(
        entry.model_copy(update={"approvals": (decision,), "decision": decision})
    )


def authorize_tool_call(
    task: AgenticTask,
    step_id: str,
    *,
    tool: str,
    parameters: Mapping[str, JsonValue],
    now: datetime,
) -> dict[str, JsonValue]:
    """Check that a tool call is exactly what was approved, before the platform runs it.

    Returns the parameters to run the tool with. Refuses when the task is terminal, the
    step is not approved, was approved on another version of itself, an earlier step has
    not executed, the step already finished, or the call differs from the approved one.
    """
    step = _find_step(task, step_id)
    phase = derive_phase(task, now)
    if phase.terminal:
        raise TaskTerminal(f"the task is {phase.value}", step_id=step_id)
    entry = task.current_status().step(step_id)
    if entry.decision is None or not entry.decision.verdict.positive:
        raise NotApproved("the step has no approving decision", step_id=step_id)
    if entry.decision.step_hash != step_hash(step):
        raise StepHashMismatch(
            "the approval was given to another version of the step", step_id=step_id
        )
    if not _earlier_executed(task, step_id):
        raise StepNotExecutable("an earlier step has not executed yet", step_id=step_id)
    if entry.execution is not None and entry.execution.state not in (
        ExecutionState.RUNNING,
        ExecutionState.OUTCOME_UNKNOWN,  # the proxy's ledger answers (unknown, or resolved)
    ):
        raise ExecutionConflict("the step already finished", step_id=step_id)
    if step.kind is not StepKind.ACTION or step.tool != tool:
        raise ToolCallMismatch(f"the approved step does not call {tool!r}", step_id=step_id)
    approved = effective_parameters(step, entry)
    if canonical_json(dict(parameters)) != canonical_json(approved):
        raise ToolCallMismatch("the parameters differ from the approved ones", step_id=step_id)
    return approved


# --- the agent's moves ---------------------------------------------------------------------


def start_execution(task: AgenticTask, step_id: str, now: datetime) -> AgenticTaskStatus:
    """Record that the agent starts (or, after a crash, restarts) running an approved step.

    Only `execution` of that step changes.
    """
    step = _find_step(task, step_id)
    phase = derive_phase(task, now)
    if phase.terminal:
        raise TaskTerminal(f"the task is {phase.value}", step_id=step_id)
    status = task.current_status()
    entry = status.step(step_id)
    if entry.decision is None or not entry.decision.verdict.positive:
        raise NotApproved("the step has no approving decision", step_id=step_id)
    if entry.decision.step_hash != step_hash(step):
        raise StepHashMismatch(
            "the approval was given to another version of the step", step_id=step_id
        )
    if not _earlier_executed(task, step_id):
        raise StepNotExecutable("an earlier step has not executed yet", step_id=step_id)
    if entry.execution is None:
        execution = Execution(state=ExecutionState.RUNNING, attempt=1, started_at=now)
    elif entry.execution.state is ExecutionState.RUNNING or is_resolved(entry):
        if entry.execution.attempt >= MAX_ATTEMPTS:
            raise ExecutionConflict("the step ran out of attempts", step_id=step_id)
        execution = Execution(
            state=ExecutionState.RUNNING, attempt=entry.execution.attempt + 1, started_at=now
        )
    else:
        raise ExecutionConflict("the step already finished", step_id=step_id)
    return status.with_step(entry.model_copy(update={"execution": execution}))


def finish_execution(
    task: AgenticTask,
    step_id: str,
    now: datetime,
    *,
    result: Mapping[str, JsonValue] | None = None,
    error: str | None = None,
    unknown: bool = False,
) -> AgenticTaskStatus:
    """Record that a running step succeeded (no `error`), failed (with `error`), or ended
    with an unknown outcome (`unknown`, with `error`: the proxy answered
    `tool_call_outcome_unknown`; the step then waits for an expert's resolution).

    Only `execution` of that step changes; a step that was in flight when the task was
    cancelled may still report how it ended.
    """
    _find_step(task, step_id)
    status = task.current_status()
    entry = status.step(step_id)
    if entry.execution is None or entry.execution.state is not ExecutionState.RUNNING:
        raise ExecutionConflict("the step is not running", step_id=step_id)
    execution = entry.execution.model_copy(
        update={
            "state": ExecutionState.OUTCOME_UNKNOWN
            if unknown
            else ExecutionState.SUCCEEDED
            if error is None
            else ExecutionState.FAILED,
            "finished_at": now,
            "result": dict(result) if result is not None else None,
            "error": error,
        }
    )
    return status.with_step(entry.model_copy(update={"execution": execution}))


def resolve(
    task: AgenticTask, step_id: str, outcome: Outcome, *, by: str, note: str | None, now: datetime
) -> AgenticTaskStatus:
    """Record an expert's resolution of a step whose outcome is unknown (the platform
    API's move). Only `resolution` of that step changes; resolving the same attempt
    again with the same outcome changes nothing, with another outcome is refused."""
    _find_step(task, step_id)
    status = task.current_status()
    entry = status.step(step_id)
    execution = entry.execution
    if execution is None or execution.state is not ExecutionState.OUTCOME_UNKNOWN:
        raise NotUnknown("the step's outcome is not unknown", step_id=step_id)
    previous = entry.resolution
    if previous is not None and previous.attempt == execution.attempt:
        if previous.outcome is outcome:
            return status
        raise NotUnknown("the step was already resolved the other way", step_id=step_id)
    resolution = Resolution(outcome=outcome, attempt=execution.attempt, by=by, at=now, note=note)
    return status.with_step(entry.model_copy(update={"resolution": resolution}))


# --- writing -------------------------------------------------------------------------------


def owned_status(status: AgenticTaskStatus, writer: Writer) -> dict[str, Any]:
    """The part of `status` that `writer` owns, as the body of its server-side apply.

    Each writer applies with its own field manager and only these fields, so that the
    three writers never overwrite each other (the admission policies check the same
    partition). Entries of status.steps carry their `id` key and the writer's fields only;
    entries with nothing of the writer's are left out.
    """
    wire = status.to_wire()
    body: dict[str, Any] = {}
    if writer is Writer.OPERATOR:
        body.update({name: wire[name] for name in OPERATOR_STATUS_FIELDS if name in wire})
    steps = []
    for entry in wire.get("steps", []):
        part = {
            name: entry[name] for name in STEP_FIELDS[writer] if entry.get(name) not in (None, [])
        }
        if part:
            steps.append({"id": entry["id"], **part})
    if steps:
        body["steps"] = steps
    return body


# --- the operator's moves ------------------------------------------------------------------


def tick(task: AgenticTask, now: datetime) -> AgenticTaskStatus:
    """Bring the derived parts of the status up to date at time `now`.

    Gives the decidable step its deadline, escalates a missed one (new deadline) until the
    policy's budget is spent and then expires it, and recomputes the step states, phase,
    current step, highest pending risk, next deadline and timestamps. A task already in a
    terminal phase is returned unchanged.
    """
    status = task.current_status()
    if status.phase is not None and status.phase.terminal:
        return status
    policy = task.spec.policy
    decidable = decidable_step(task)
    entries: list[StepStatus] = []
    for step in task.spec.steps:
        entry = status.step(step.id)
        if decidable is not None and step.id == decidable.id:
            if entry.deadline is None:
                entry = entry.model_copy(
                    update={"deadline": now + timedelta(seconds=policy.decision_deadline_seconds)}
                )
            elif now >= entry.deadline and not is_expired(entry, policy, now):
                entry = entry.model_copy(
                    update={
                        "escalations": entry.escalations + 1,
                        "deadline": now + timedelta(seconds=policy.escalation.interval_seconds),
                    }
                )
        entries.append(entry)
    updated = task.model_copy(
        update={"status": status.model_copy(update={"steps": _merge(status, entries)})}
    )
    entries = [
        entry.model_copy(update={"state": step_state(updated, entry.id, now)}) for entry in entries
    ]
    updated = task.model_copy(
        update={"status": status.model_copy(update={"steps": _merge(status, entries)})}
    )
    phase = derive_phase(updated, now)
    waiting = decidable_step(updated) if phase is TaskPhase.PENDING_APPROVAL else None
    new_status = updated.current_status().model_copy(
        update={
            "phase": phase,
            "current_step": current_step(updated),
            "highest_pending_risk": highest_pending_risk(updated, now),
            "next_deadline": updated.current_status().step(waiting.id).deadline
            if waiting is not None
            else None,
            "observed_generation": task.metadata.generation,
            "started_at": status.started_at or now,
            "completed_at": now if phase.terminal else None,
        }
    )
    return new_status


def _merge(status: AgenticTaskStatus, entries: list[StepStatus]) -> tuple[StepStatus, ...]:
    """Plan entries in plan order, then any entries for unknown ids left as they were."""
    known = {entry.id for entry in entries}
    return (*entries, *(entry for entry in status.steps if entry.id not in known))


def cancel(task: AgenticTask, now: datetime) -> AgenticTaskStatus:
    """Stop the task for good (phase Cancelled); refused when it already ended."""
    phase = derive_phase(task, now)
    if phase.terminal:
        raise TaskTerminal(f"the task is already {phase.value}")
    status = task.current_status()
    return status.model_copy(
        update={
            "phase": TaskPhase.CANCELLED,
            "completed_at": now,
            "highest_pending_risk": None,
            "next_deadline": None,
        }
    )
