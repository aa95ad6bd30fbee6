"""The operator's moves: :func:`tick` (deadlines, escalations, expiry, step states,
phase and timestamps) and :func:`cancel`."""

from __future__ import annotations

from datetime import datetime, timedelta

from ..resources import (
    AgenticTask,
    AgenticTaskStatus,
    StepStatus,
    TaskPhase,
    TaskPolicy,
)
from .errors import (
    TaskTerminal,
)
from .state import (
    client_wait_step,
    current_step,
    decidable_step,
    derive_phase,
    highest_pending_risk,
    reopened,
    reopened_deadline,
    step_state,
    wait_expired,
)


def tick(task: AgenticTask, now: datetime) -> AgenticTaskStatus:
    """Bring the derived parts of the status up to date at time `now`.

    Gives the step waiting for a human (the decidable step, or an approved step waiting for
    the initiating client's confirmation: one deadline covers both waits) its deadline,
    escalates a missed one (new deadline) until the policy's budget is spent and then
    expires it, and recomputes the step states, phase,
    current step, highest pending risk, next deadline and timestamps. A task already in a
    terminal phase is returned unchanged, unless an expert's retry reopened it
    (:func:`~humanwork_core.taskflow.state.reopened`).
    """
    status = task.current_status()
    if status.phase is not None and status.phase.terminal and not reopened(task):
        return status
    policy = task.spec.policy
    decidable = decidable_step(task) or client_wait_step(task)
    entries: list[StepStatus] = []
    for step in task.spec.steps:
        entry = status.step(step.id)
        if decidable is not None and step.id == decidable.id:
            entry = _waiting(entry, policy, now)
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
    waiting = (
        decidable_step(updated) or client_wait_step(updated)
        if phase is TaskPhase.PENDING_APPROVAL
        else None
    )
    if waiting is not None and wait_expired(updated.current_status().step(waiting.id), policy, now):
        waiting = None  # expired, awaiting a reopening: no deadline ahead
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


def _waiting(entry: StepStatus, policy: TaskPolicy, now: datetime) -> StepStatus:
    """The step waiting for a human with its deadline given, moved by a reopening, or
    escalated when missed (until the budget is spent)."""
    new_deadline = reopened_deadline(entry)
    if new_deadline is not None:  # an expert reopened the expired step
        return entry.model_copy(update={"deadline": new_deadline, "state": None})
    if entry.deadline is None:
        return entry.model_copy(
            update={"deadline": now + timedelta(seconds=policy.decision_deadline_seconds)}
        )
    if now >= entry.deadline and not wait_expired(entry, policy, now):
        return entry.model_copy(
            update={
                "escalations": entry.escalations + 1,
                "deadline": now + timedelta(seconds=policy.escalation.interval_seconds),
            }
        )
    return entry


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
