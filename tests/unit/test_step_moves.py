"""The floor every move of a step goes through (`platform_api.steps`): how a refusal of the
contract is answered for each kind of move, and the one shape of a move's audit record."""

from __future__ import annotations

import uuid

import pytest

from humanwork_core import taskflow
from platform_api.steps.audit import MoveRecord
from platform_api.steps.refusals import Answer, refused

ORG = uuid.UUID("00000000-0000-0000-0000-000000000001")


@pytest.mark.parametrize(
    ("exc", "answer", "status", "code"),
    [
        # a decision: the class that lists the refusal
        (taskflow.HumanTaskExpired("too late"), Answer.BY_KIND, 410, "human_task_expired"),
        (taskflow.IdempotencyConflict("reused"), Answer.BY_KIND, 422, "idempotency_conflict"),
        (taskflow.StepNotFound("no step"), Answer.BY_KIND, 404, "not_found"),
        # resolve, retry, reopen: 409 `conflict`, the refusal's code as the reason
        (taskflow.NotUnknown("known"), Answer.CONFLICT, 409, "conflict"),
        (taskflow.NotExpired("not yet"), Answer.CONFLICT, 409, "conflict"),
        # cancel: 409 `run_state_conflict`
        (taskflow.TaskTerminal("ended"), Answer.RUN_STATE, 409, "run_state_conflict"),
    ],
)
def test_a_refusal_is_answered_by_the_move_s_kind(
    exc: taskflow.TaskFlowError, answer: Answer, status: int, code: str
) -> None:
    error = refused(exc, answer, "s1")
    assert (error.status_code, error.code, error.message) == (status, code, exc.message)
    if answer is Answer.CONFLICT:
        assert error.details == {"reason": exc.code, "step_id": "s1"}
    if answer is Answer.BY_KIND:
        assert error.details["reason"] == exc.code


def test_every_move_is_audited_in_one_shape() -> None:
    step = MoveRecord("ann", "task.step.resolved", "ns", "t1", ORG, "s1", {"note": "x"}, "u-1")
    assert step.fields() == {
        "actor": "ann",
        "action": "task.step.resolved",
        "target": "agentictask:ns/t1",
        "org_id": ORG,
        "details": {"step_id": "s1", "note": "x", "uid": "u-1"},
    }
    assert list(step.details()) == ["step_id", "note", "uid"]  # the step first, the uid last
    whole = MoveRecord(
        "ann", "task.cancel_requested", "ns", "t1", ORG, None, {"phase": "Pending"}, kind="task"
    )
    assert whole.fields()["target"] == "task:ns/t1"
    assert whole.details() == {"phase": "Pending"}
