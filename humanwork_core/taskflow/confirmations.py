"""The platform API's moves on a client's confirmation: :func:`require_confirmation` (when
it first sees a task, the steps its initiating client must confirm) and the client's
:func:`confirm` and :func:`decline`.

Such a step executes only when approved by the experts AND confirmed by the client, in
either order; a confirmation is bound to the step as the client saw it
(:func:`~humanwork_core.taskflow.state.confirmation_hash`, the experts' amended
parameters included), so an expert's edit voids it and a replay of it is refused; a
decline halts the task like a rejection, its reason going back to the agent.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from ..resources import (
    AgenticTask,
    AgenticTaskStatus,
    Confirmation,
    ConfirmationState,
    StepStatus,
)
from .errors import (
    ConfirmationNotRequired,
    ConfirmationStale,
    StepConfirmationClosed,
    StepDeclined,
    TaskTerminal,
)
from .state import (
    _find_step,
    confirmation_hash,
    derive_phase,
    is_confirmed,
    is_declined,
    needs_confirmation,
)


def require_confirmation(task: AgenticTask, step_ids: Iterable[str]) -> AgenticTaskStatus:
    """The status with a waiting confirmation recorded on each of `step_ids` that has no
    confirmation record yet and has not run; every other step is left as it is (a record
    once written is never removed or weakened by this move)."""
    status = task.current_status()
    for step_id in step_ids:
        _find_step(task, step_id)
        entry = status.step(step_id)
        if entry.confirmation is not None or entry.execution is not None:
            continue
        record = Confirmation(required=True, state=ConfirmationState.WAITING)
        status = status.with_step(entry.model_copy(update={"confirmation": record}))
    return status


def _open_entry(task: AgenticTask, step_id: str, now: datetime) -> StepStatus:
    """The step's status when the client may still confirm or decline it."""
    _find_step(task, step_id)
    phase = derive_phase(task, now)
    entry = task.current_status().step(step_id)
    if is_declined(entry):
        raise StepDeclined("the step was declined; a decline is never changed", step_id=step_id)
    if phase.terminal:
        raise TaskTerminal(f"the task is {phase.value}", step_id=step_id)
    if not needs_confirmation(entry):
        raise ConfirmationNotRequired("the step needs no confirmation", step_id=step_id)
    if entry.execution is not None:
        raise StepConfirmationClosed("the step already ran", step_id=step_id)
    return entry


def confirm(
    task: AgenticTask, step_id: str, *, by: str, step_hash: str, now: datetime
) -> AgenticTaskStatus:
    """Record the client's confirmation of the step as it saw it (`step_hash`, the
    :func:`confirmation_hash` it was shown). Only `confirmation` of that step changes;
    confirming the same version again changes nothing; a hash of another version (an
    expert edited the step since, or a replay after an edit) is refused."""
    step = _find_step(task, step_id)
    status = task.current_status()
    entry = _open_entry(task, step_id, now)
    current = confirmation_hash(step, entry)
    if step_hash != current:
        raise ConfirmationStale(
            "the step changed since the client saw it: look again and confirm the new values",
            step_id=step_id,
        )
    if is_confirmed(step, entry):
        return status
    record = Confirmation(
        required=True, state=ConfirmationState.CONFIRMED, by=by, at=now, step_hash=current
    )
    return status.with_step(entry.model_copy(update={"confirmation": record}))


def decline(
    task: AgenticTask, step_id: str, *, by: str, reason: str, now: datetime
) -> AgenticTaskStatus:
    """Record the client's decline of the step with its reason: the task halts like on a
    rejection (:func:`~humanwork_core.taskflow.state.derive_phase`). Only `confirmation`
    of that step changes; a declined step cannot be confirmed or declined again."""
    step = _find_step(task, step_id)
    status = task.current_status()
    entry = _open_entry(task, step_id, now)
    record = Confirmation(
        required=True,
        state=ConfirmationState.DECLINED,
        by=by,
        at=now,
        reason=reason,
        step_hash=confirmation_hash(step, entry),
    )
    return status.with_step(entry.model_copy(update={"confirmation": record}))
