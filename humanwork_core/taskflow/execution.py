"""The agent's moves (start and finish a step's execution), the expert's resolution of an
execution whose outcome is unknown, and the expert's retry of a failed one."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from pydantic import JsonValue

from .. import catalog
from ..resources import (
    AgenticTask,
    AgenticTaskStatus,
    Execution,
    ExecutionState,
    Step,
    StepStatus,
)
from ..resources.agentictask import Outcome, Resolution
from .errors import (
    ExecutionConflict,
    NotApproved,
    NotConfirmed,
    NotFailed,
    NotRetrySafe,
    NotUnknown,
    StepHashMismatch,
    StepNotExecutable,
    TaskTerminal,
)
from .state import (
    _earlier_executed,
    _find_step,
    derive_phase,
    effective_parameters,
    is_confirmed,
    is_resolved,
    is_retried,
    needs_confirmation,
    step_hash,
)

MAX_ATTEMPTS = 100


def approved_step(task: AgenticTask, step_id: str, now: datetime) -> tuple[Step, StepStatus]:
    """The step and its status when it may run now: the task is not terminal, the step has
    an approving decision given to this very version of it, the initiating client's
    confirmation of that version where the platform recorded it is needed, and every
    earlier step has executed. The one check behind starting an execution and the proxy's
    tool call."""
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
    if needs_confirmation(entry) and not is_confirmed(step, entry):
        raise NotConfirmed(
            "the step waits for the initiating client's confirmation of this version",
            step_id=step_id,
        )
    if not _earlier_executed(task, step_id):
        raise StepNotExecutable("an earlier step has not executed yet", step_id=step_id)
    return step, entry


def start_execution(task: AgenticTask, step_id: str, now: datetime) -> AgenticTaskStatus:
    """Record that the agent starts (or, after a crash, restarts) running an approved step.

    Only `execution` of that step changes.
    """
    _step, entry = approved_step(task, step_id, now)
    status = task.current_status()
    if entry.execution is None:
        execution = Execution(state=ExecutionState.RUNNING, attempt=1, started_at=now)
    elif entry.execution.state is ExecutionState.RUNNING or is_resolved(entry) or is_retried(entry):
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
    if outcome is Outcome.RETRY:
        raise NotUnknown("an unknown outcome is applied or not_applied", step_id=step_id)
    previous = entry.resolution
    if previous is not None and previous.attempt == execution.attempt:
        if previous.outcome is outcome:
            return status
        raise NotUnknown("the step was already resolved the other way", step_id=step_id)
    resolution = Resolution(outcome=outcome, attempt=execution.attempt, by=by, at=now, note=note)
    return status.with_step(entry.model_copy(update={"resolution": resolution}))


def retry(
    task: AgenticTask, step_id: str, *, by: str, note: str | None, now: datetime
) -> AgenticTaskStatus:
    """Record an expert's retry of a step whose tool call failed (the platform API's move):
    `resolution` with outcome `retry` for the failed attempt, which reopens the failed task
    (the operator moves it back to InProgress) and lets the agent run the step once more.

    Refused unless the step's execution failed (an unknown outcome is resolved instead, never
    retried blindly), its action is safe to retry (the catalog's `retry_safe`), the task
    failed on it (not cancelled, rejected or expired) and the retry passes the same check as
    every execution (:func:`approved_step`). Retrying the same attempt again changes nothing.
    """
    step = _find_step(task, step_id)
    status = task.current_status()
    entry = status.step(step_id)
    execution = entry.execution
    if is_retried(entry):
        return status
    if execution is None or execution.state is not ExecutionState.FAILED:
        raise NotFailed("only a step whose tool call failed can be retried", step_id=step_id)
    if status.phase is not None and status.phase.terminal and status.phase.value != "Failed":
        raise TaskTerminal(f"the task is {status.phase.value}", step_id=step_id)
    action = effective_parameters(step, entry).get("action")
    if not catalog.retry_safe(step.tool, action):
        raise NotRetrySafe(
            f"{step.tool}.{action} is not safe to run twice: the step stays failed",
            step_id=step_id,
        )
    if execution.attempt >= MAX_ATTEMPTS:
        raise ExecutionConflict("the step ran out of attempts", step_id=step_id)
    resolution = Resolution(
        outcome=Outcome.RETRY, attempt=execution.attempt, by=by, at=now, note=note
    )
    after = status.with_step(entry.model_copy(update={"resolution": resolution}))
    approved_step(task.model_copy(update={"status": after}), step_id, now)
    return after
