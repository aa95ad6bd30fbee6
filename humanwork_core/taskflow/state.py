"""Reading an AgenticTask's state: the step hash a decision is bound to (and the one a
client's confirmation is bound to), the step predicates, which step is decidable or
executable, the derived phase, step states and the parameters a tool runs with."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from datetime import datetime, timedelta

from pydantic import JsonValue

from .. import catalog
from ..policy import OrgPolicy, effective_risk
from ..policy import required_approvals as _quorum
from ..resources import (
    AgenticTask,
    ConfirmationState,
    ExecutionState,
    OnExpiry,
    Risk,
    Step,
    StepState,
    StepStatus,
    TaskPhase,
    TaskPolicy,
    Verdict,
)
from ..resources.agentictask import Outcome
from .errors import (
    StepNotFound,
)


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


def confirmation_parameters(step: Step, entry: StepStatus) -> dict[str, JsonValue]:
    """The parameters the client confirms: the experts' amendment (the decision's, else the
    first approval's) if any, else the plan's."""
    for decision in (entry.decision, *entry.approvals):
        if decision is not None and decision.parameters is not None:
            return dict(decision.parameters)
    return dict(step.parameters)


def confirmation_hash(step: Step, entry: StepStatus) -> str:
    """SHA-256 (hex) of what the client confirms: the step (:func:`step_hash`) with the
    parameters it will run with (:func:`confirmation_parameters`), so that an expert's edit
    voids a confirmation given before it."""
    payload = {"step": step_hash(step), "parameters": confirmation_parameters(step, entry)}
    return hashlib.sha256(canonical_json(payload)).hexdigest()


def needs_confirmation(entry: StepStatus) -> bool:
    """Whether the platform recorded that the step needs the initiating client's word."""
    return entry.confirmation is not None and entry.confirmation.required


def is_confirmed(step: Step, entry: StepStatus) -> bool:
    """Whether the client confirmed this very version of the step (edits included)."""
    confirmation = entry.confirmation
    return (
        confirmation is not None
        and confirmation.state is ConfirmationState.CONFIRMED
        and confirmation.step_hash == confirmation_hash(step, entry)
    )


def is_declined(entry: StepStatus) -> bool:
    """Whether the initiating client declined the step (it halts the task)."""
    confirmation = entry.confirmation
    return (
        confirmation is not None
        and confirmation.required
        and confirmation.state is ConfirmationState.DECLINED
    )


def awaits_client(step: Step, entry: StepStatus) -> bool:
    """Whether the step still waits for the client: required, neither declined nor
    confirmed in its current version, and not run yet."""
    return (
        needs_confirmation(entry)
        and not is_declined(entry)
        and not is_confirmed(step, entry)
        and entry.execution is None
    )


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


def reopened_deadline(entry: StepStatus) -> datetime | None:
    """The new deadline of a reopening the operator has not given the step yet (the step
    was reopened at or after the deadline it holds); None otherwise."""
    reopened = entry.reopened
    if reopened is None or entry.deadline is None or reopened.at < entry.deadline:
        return None
    return reopened.at + timedelta(seconds=reopened.deadline_seconds)


def is_expired(entry: StepStatus, policy: TaskPolicy, now: datetime) -> bool:
    """Whether an undecided step ran out of time: deadline passed, escalations spent (a
    reopening gives it a new deadline, see :func:`reopened_deadline`)."""
    if entry.decision is not None:
        return False
    return wait_expired(entry, policy, now)


def wait_expired(entry: StepStatus, policy: TaskPolicy, now: datetime) -> bool:
    """Whether the wait for a human on the step (an expert's decision, or the client's
    confirmation after it) ran out of time: deadline passed, escalations spent."""
    reopened = reopened_deadline(entry)
    if reopened is not None:
        return now >= reopened
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
        if awaits_client(step, entry) or is_declined(entry):
            return None
        if is_approved(entry) and (
            entry.execution is None
            or entry.execution.state is ExecutionState.RUNNING
            or is_resolved(entry)
            or is_retried(entry)
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


def is_retried(entry: StepStatus) -> bool:
    """Whether an expert retried the step's current failed execution (the agent then runs
    it again; see :func:`humanwork_core.taskflow.retry`)."""
    return (
        entry.execution is not None
        and entry.execution.state is ExecutionState.FAILED
        and entry.resolution is not None
        and entry.resolution.outcome is Outcome.RETRY
        and entry.resolution.attempt == entry.execution.attempt
    )


def awaiting_retry(task: AgenticTask) -> Step | None:
    """The step an expert may still retry: the task failed on it, its execution failed
    (not retried yet) and its action is safe to retry (the catalog's `retry_safe`)."""
    status = task.current_status()
    if status.phase not in (None, TaskPhase.FAILED):
        return None
    for step in task.spec.steps:
        entry = status.step(step.id)
        failed = entry.execution is not None and entry.execution.state is ExecutionState.FAILED
        if failed and not is_retried(entry):
            action = effective_parameters(step, entry).get("action")
            return step if catalog.retry_safe(step.tool, action) else None
    return None


def reopened(task: AgenticTask) -> bool:
    """Whether a task recorded `Failed` was reopened by an expert's retry of its failed
    step: the one way out of a terminal phase."""
    status = task.current_status()
    if status.phase is not TaskPhase.FAILED:
        return False
    return any(is_retried(status.step(step.id)) for step in task.spec.steps)


def derive_phase(task: AgenticTask, now: datetime) -> TaskPhase:
    """The phase the task is in, from its decisions, executions and the time.

    A terminal phase already recorded is kept: terminal phases are absorbing, but for a
    failed task reopened by an expert's retry (:func:`reopened`).
    """
    status = task.current_status()
    if status.phase is not None and status.phase.terminal and not reopened(task):
        return status.phase
    for step in task.spec.steps:
        entry = status.step(step.id)
        if is_rejected(entry) or is_declined(entry):
            return TaskPhase.REJECTED
        if entry.execution is not None:
            if is_retried(entry):
                return TaskPhase.IN_PROGRESS
            if entry.execution.state is ExecutionState.FAILED:
                return TaskPhase.FAILED
            if entry.execution.state is ExecutionState.RUNNING or is_resolved(entry):
                return TaskPhase.IN_PROGRESS
            if entry.execution.state is ExecutionState.OUTCOME_UNKNOWN:
                return TaskPhase.PENDING_APPROVAL  # waits for an expert's resolution
            continue
        if entry.decision is not None and awaits_client(step, entry):
            expired = wait_expired(entry, task.spec.policy, now)
            ends = task.spec.policy.on_expiry is OnExpiry.END
            return TaskPhase.EXPIRED if expired and ends else TaskPhase.PENDING_APPROVAL
        if entry.decision is not None:
            return TaskPhase.IN_PROGRESS
        if is_expired(entry, task.spec.policy, now) and (
            task.spec.policy.on_expiry is OnExpiry.END
        ):
            return TaskPhase.EXPIRED
        return TaskPhase.PENDING_APPROVAL  # an expired step awaits a reopening
    return TaskPhase.COMPLETED


def client_wait_step(task: AgenticTask) -> Step | None:
    """The step the task waits on the client for: approved, every earlier step executed,
    and its confirmation still missing; None otherwise."""
    status = task.current_status()
    if status.phase is not None and status.phase.terminal:
        return None
    for step in task.spec.steps:
        entry = status.step(step.id)
        if is_executed(entry):
            continue
        return step if is_approved(entry) and awaits_client(step, entry) else None
    return None


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
    step = _find_step(task, step_id)
    entry = task.current_status().step(step_id)
    if is_rejected(entry) or is_declined(entry):
        return StepState.REJECTED
    if is_retried(entry):
        return StepState.APPROVED  # retried: waits for the agent to run it again
    if entry.execution is not None:
        return {
            ExecutionState.RUNNING: StepState.EXECUTING,
            ExecutionState.SUCCEEDED: StepState.EXECUTED,
            ExecutionState.FAILED: StepState.FAILED,
            ExecutionState.OUTCOME_UNKNOWN: StepState.OUTCOME_UNKNOWN,
        }[entry.execution.state]
    if entry.decision is not None and awaits_client(step, entry):
        return (
            StepState.EXPIRED
            if wait_expired(entry, task.spec.policy, now)
            else StepState.AWAITING_CLIENT
        )
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
