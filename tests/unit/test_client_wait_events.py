"""The operator's Events of a task's wait for its initiating client: `WaitingForClient`
(naming the step) when the `WaitingForClient` condition turns true, `ClientConfirmed` or
`ClientDeclined` when it turns false because the client answered, and nothing on a pass
that keeps the condition as it was (the operator reconciles a task many times)."""

from __future__ import annotations

from agent_operator.tasks import client_condition, client_events
from humanwork_core import taskflow
from humanwork_core.resources import (
    AgenticTask,
    AgenticTaskStatus,
    Confirmation,
    ConfirmationState,
    Risk,
    StepStatus,
    TaskPhase,
)

from .factories import T0, action, make_task, with_status

TASK = make_task(action("read"), action("write", Risk.HIGH, description="Update 14 SKUs"))
READ_DONE = StepStatus.model_validate(
    {"id": "read", "execution": {"state": "Succeeded", "startedAt": T0, "finishedAt": T0}}
)
REASON = "not before the stock count, call me on +1 415 555 0100"


def confirmation(state: ConfirmationState) -> Confirmation:
    asked = Confirmation(required=True, state=ConfirmationState.WAITING)
    if state is ConfirmationState.WAITING:
        return asked
    step = TASK.step("write")
    assert step is not None
    return Confirmation(
        required=True,
        state=state,
        by="client@acme.example",
        at=T0,
        step_hash=taskflow.confirmation_hash(step, StepStatus(id="write", confirmation=asked)),
        reason=REASON if state is ConfirmationState.DECLINED else None,
    )


def passed(
    state: ConfirmationState, phase: TaskPhase = TaskPhase.PENDING_APPROVAL
) -> AgenticTaskStatus:
    """The status after an operator's pass: the client's confirmation as recorded, the
    current step and the condition as the operator computes them."""
    write = StepStatus(id="write", confirmation=confirmation(state))
    status = AgenticTaskStatus(phase=phase, steps=(READ_DONE, write))
    task: AgenticTask = with_status(TASK, status)
    status = status.model_copy(update={"current_step": taskflow.current_step(task)})
    return status.model_copy(update={"conditions": (client_condition(TASK, status, T0),)})


def reasons(old: AgenticTaskStatus, new: AgenticTaskStatus) -> list[str]:
    return [e.reason for e in client_events(TASK, old, new)]


def test_a_step_starting_to_wait_for_the_client_is_announced_once_by_name() -> None:
    before = AgenticTaskStatus(phase=TaskPhase.PENDING_APPROVAL, steps=(READ_DONE,))
    waiting = passed(ConfirmationState.WAITING)
    [event] = client_events(TASK, before, waiting)
    assert (event.reason, event.warning) == ("WaitingForClient", False)
    assert "write" in event.message and "Update 14 SKUs" in event.message
    assert client_events(TASK, waiting, passed(ConfirmationState.WAITING)) == []  # kept


def test_the_clients_answer_is_announced_once_without_its_words() -> None:
    waiting = passed(ConfirmationState.WAITING)
    confirmed = passed(ConfirmationState.CONFIRMED)
    assert reasons(waiting, confirmed) == ["ClientConfirmed"]
    assert reasons(confirmed, passed(ConfirmationState.CONFIRMED)) == []
    declined = passed(ConfirmationState.DECLINED, TaskPhase.REJECTED)
    [event] = client_events(TASK, waiting, declined)
    assert (event.reason, event.warning) == ("ClientDeclined", False)
    assert "write" in event.message and "415" not in event.message
    assert reasons(declined, declined) == []


def test_a_wait_ended_by_anything_but_the_client_is_not_told_as_its_answer() -> None:
    waiting = passed(ConfirmationState.WAITING)
    cancelled = passed(ConfirmationState.WAITING, TaskPhase.CANCELLED)
    assert reasons(waiting, cancelled) == []
    # and a step that waits again (an expert's edit voided the confirmation) is told again
    assert reasons(passed(ConfirmationState.CONFIRMED), waiting) == ["WaitingForClient"]
