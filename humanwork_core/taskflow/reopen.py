"""The platform's move on an expired decision (seed 001: "the run stays blocked for a
fresh escalation"): :func:`reopen` gives the step a new deadline.

Under `spec.policy.onExpiry: AwaitReopen` (the default) a decision that ran out of time
(deadline passed, escalations spent) leaves the task in PendingApproval, the step
`Expired` and undecidable (`human_task_expired`). An expert reopens it: the platform
writes the step's `reopened` (who, when, the new deadline in seconds, a count and a
reason), and the operator's :func:`~humanwork_core.taskflow.tick` gives the step that
deadline; until then :func:`~humanwork_core.taskflow.is_expired` already reads it. Under
`onExpiry: End` the task ended in phase Expired and nothing reopens it.
"""

from __future__ import annotations

from datetime import datetime

from ..resources import AgenticTask, AgenticTaskStatus, OnExpiry, Reopening
from .errors import NotExpired, StepNotDecidable, TaskTerminal
from .state import _find_step, decidable_step, derive_phase, is_expired


def reopen(
    task: AgenticTask,
    step_id: str,
    now: datetime,
    *,
    by: str,
    deadline_seconds: int,
    reason: str | None = None,
) -> AgenticTaskStatus:
    """The status with the expired step `step_id` reopened until `now + deadline_seconds`."""
    _find_step(task, step_id)
    phase = derive_phase(task, now)
    if phase.terminal:
        raise TaskTerminal(f"the task is {phase.value}", step_id=step_id)
    decidable = decidable_step(task)
    if decidable is None or decidable.id != step_id:
        raise StepNotDecidable("only the step the task waits on can be reopened", step_id=step_id)
    status = task.current_status()
    entry = status.step(step_id)
    if task.spec.policy.on_expiry is not OnExpiry.AWAIT_REOPEN or not is_expired(
        entry, task.spec.policy, now
    ):
        raise NotExpired("the step's decision has not expired", step_id=step_id)
    count = entry.reopened.count + 1 if entry.reopened is not None else 1
    reopened = Reopening(
        by=by, at=now, deadline_seconds=deadline_seconds, count=count, reason=reason
    )
    return status.with_step(entry.model_copy(update={"reopened": reopened}))
