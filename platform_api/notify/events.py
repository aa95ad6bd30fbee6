"""The events the platform tells about, and which of them a task's state implies.

Each event has a stable id (the task's uid, the step, and what makes the event distinct,
such as the escalation count), so deriving the events of the same state again, on another
replica or after a restart, yields the same ids and the event log keeps each once.
Pure: no I/O, the time is passed in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from humanwork_core import receipts, taskflow
from humanwork_core.policy import effective_risk
from humanwork_core.resources import (
    AgenticTask,
    Execution,
    ExecutionState,
    Step,
    StepState,
    StepStatus,
    TaskPhase,
)
from platform_api.step_results import result_text

DECISION_NEEDED = "decision_needed"
NEAR_DEADLINE = "near_deadline"
ESCALATED = "escalated"
EXPIRED = "expired"
REJECTED = "rejected"
STEP_FAILED = "step_failed"
STEP_EXECUTED = "step_executed"
"""A step's tool call ran and succeeded (its result summary in `result`, the platform's
signed receipt of the call in `receipt`)."""
STEP_OUTCOME_UNKNOWN = "step_outcome_unknown"
"""Whether a step's tool call took effect is unknown: an expert resolves it."""
COMPLETED = "completed"
FAILED = "failed"
DECIDED = "decided"
REQUEST_ENDED = "request_ended"
CANCELLED = "cancelled"
DISPATCH_FAILED = "dispatch_failed"
"""A client's message the agent did not answer (`platform_api.dispatch`): an expert acts."""

WEBHOOK_EVENTS = (
    DECISION_NEEDED,
    NEAR_DEADLINE,
    ESCALATED,
    EXPIRED,
    REJECTED,
    STEP_FAILED,
    COMPLETED,
    FAILED,
    DISPATCH_FAILED,
)
"""What a webhook receives unless it names fewer."""

EVENTS = (
    *WEBHOOK_EVENTS,
    DECIDED,
    REQUEST_ENDED,
    CANCELLED,
    STEP_EXECUTED,
    STEP_OUTCOME_UNKNOWN,
)
"""Every event a webhook may ask for; the live stream carries them all. `request_ended`:
a request's last task ended (a rejection revised by the agent does not end it);
`cancelled`: a task was cancelled (so that open screens learn it too); `step_executed` and
`step_outcome_unknown`: how a step's run ended (its conversation is told, with the result)."""

ENDINGS = {
    TaskPhase.COMPLETED: COMPLETED,
    TaskPhase.REJECTED: REJECTED,
    TaskPhase.EXPIRED: EXPIRED,
    TaskPhase.FAILED: FAILED,
    TaskPhase.CANCELLED: CANCELLED,
}


@dataclass(frozen=True)
class Event:
    """One event of an org: its stable id, its name and what it says."""

    org_id: str
    event_id: str
    event: str
    payload: dict[str, Any] = field(default_factory=dict)
    receipt_key: tuple[str, str] | None = None
    """The agent and ledger key of the step's tool call (its ledger row's key in the org):
    the notifier adds its signed receipt to the payload (`receipt`, null when none)."""


def _base(task: AgenticTask) -> dict[str, Any]:
    meta = task.metadata
    return {
        "task_id": f"{meta.namespace}/{meta.name}",
        "summary": task.spec.description,
        "workflow": task.spec.agent_ref.name,
        "revision_of": task.spec.revision_of,
        "conversation_id": task.spec.conversation_id,
    }


def _step(task: AgenticTask, step: Step) -> dict[str, Any]:
    entry = task.current_status().step(step.id)
    return {
        **_base(task),
        "step_id": step.id,
        "human_task_id": f"{task.metadata.namespace}/{task.metadata.name}/{step.id}",
        "step_description": step.description,
        "risk": effective_risk(step).value,
        "deadline": entry.deadline.isoformat() if entry.deadline else None,
        "escalations": entry.escalations,
    }


_RUN_ENDINGS = {
    ExecutionState.SUCCEEDED: STEP_EXECUTED,
    ExecutionState.FAILED: STEP_FAILED,
    ExecutionState.OUTCOME_UNKNOWN: STEP_OUTCOME_UNKNOWN,
}
"""How a step's run ended, as the event that tells it (one per attempt)."""


def _run_event(task: AgenticTask, step: Step, run: Execution) -> Event | None:
    """The event of the step's finished run (None while it runs): its error, its result
    in plain language (redacted, as the client's view of the step shows it) and, added by
    the notifier, the signed receipt of its tool call."""
    event = _RUN_ENDINGS.get(run.state)
    if event is None:
        return None
    payload = {
        **_step(task, step),
        "error": run.error,
        "result": result_text(run.result, run.error),
    }
    made = _make(task, f"{step.id}:{event}:{run.attempt}", event, payload)
    agent = f"{task.metadata.namespace}/{task.spec.agent_ref.name}"
    key = receipts.ledger_key(task.metadata.uid or task.metadata.name, step.id)
    return Event(made.org_id, made.event_id, made.event, made.payload, (agent, key))


def _make(task: AgenticTask, suffix: str, event: str, payload: dict[str, Any]) -> Event:
    uid = task.metadata.uid or f"{task.metadata.namespace}/{task.metadata.name}"
    return Event(task.spec.org_id, f"{uid}:{suffix}", event, payload)


def _step_events(task: AgenticTask) -> list[Event]:
    found: list[Event] = []
    for step in task.spec.steps:
        entry = task.current_status().step(step.id)
        if entry.decision is not None:
            payload = {
                **_step(task, step),
                "verdict": entry.decision.verdict.value,
                "feedback": entry.decision.feedback,
            }
            found.append(_make(task, f"{step.id}:decided", DECIDED, payload))
        run = _run_event(task, step, entry.execution) if entry.execution else None
        if run is not None:
            found.append(run)
        if entry.escalations > 0:
            suffix = f"{step.id}:escalated:{entry.escalations}"
            found.append(_make(task, suffix, ESCALATED, _step(task, step)))
        if _awaits_reopen(task, entry):
            # under `onExpiry: AwaitReopen` the task does not end: the step's expiry is the
            # event (once per reopening: a reopened step may expire again)
            times = entry.reopened.count if entry.reopened is not None else 0
            suffix = f"{step.id}:expired:{times}"
            found.append(_make(task, suffix, EXPIRED, _step(task, step)))
    return found


def _awaits_reopen(task: AgenticTask, entry: StepStatus) -> bool:
    """Whether the step's decision expired while its task, still open, waits for a reopen."""
    phase = task.current_status().phase
    return (
        entry.decision is None
        and entry.state is StepState.EXPIRED
        and not (phase is not None and phase.terminal)
    )


def task_events(task: AgenticTask) -> list[Event]:
    """The events the task's current state implies (each with its stable id)."""
    found = _step_events(task)
    phase = task.current_status().phase
    if phase is not None and phase.terminal:
        ending = ENDINGS.get(phase)
        if ending is not None:
            found.append(_make(task, ending, ending, {**_base(task), "phase": phase.value}))
        return found
    step = taskflow.decidable_step(task)
    if step is not None:
        found.append(_make(task, f"{step.id}:decision_needed", DECISION_NEEDED, _step(task, step)))
    return found


def near_deadline(task: AgenticTask, now: datetime, near: timedelta) -> Event | None:
    """The near-deadline event of the task's decidable step, when its deadline is within
    `near` of `now` (and not past)."""
    phase = task.current_status().phase
    step = taskflow.decidable_step(task)
    if step is None or (phase is not None and phase.terminal):
        return None
    entry = task.current_status().step(step.id)
    if entry.deadline is None or not now <= entry.deadline <= now + near:
        return None
    suffix = f"{step.id}:near_deadline:{entry.escalations}"
    return _make(task, suffix, NEAR_DEADLINE, _step(task, step))


def deadline_of(task: AgenticTask) -> datetime | None:
    """The deadline of the task's decidable step, or of the approved step waiting for the
    initiating client's confirmation (one deadline covers both waits), if any."""
    step = taskflow.decidable_step(task) or taskflow.client_wait_step(task)
    if step is None:
        return None
    return task.current_status().step(step.id).deadline
