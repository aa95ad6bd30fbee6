"""Seed 000's view of a task (`platform_api/tasks/seedview.py`): every step state and phase
has its seed status, and a task driven through the real state machine shows the seed's
status and each step's order and status at every stage: pending, approved, running,
executed, completed, rejected, failed, unknown outcome, escalated, expired, cancelled."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from humanwork_core import taskflow as tf
from humanwork_core.policy import STRICT
from humanwork_core.resources import (
    AgenticTask,
    EscalationPolicy,
    OnExpiry,
    StepState,
    TaskPhase,
    TaskPolicy,
    Verdict,
)
from platform_api.tasks.seedview import (
    STEP_STATUS,
    SeedStepStatus,
    SeedTaskStatus,
    seed_status,
    seed_steps,
    step_status,
    task_status,
)

from .factories import T0, make_task, with_status

READ, WRITE = "read", "write"


def decide(task: AgenticTask, step_id: str, verdict: Verdict, **fields: object) -> AgenticTask:
    step = task.step(step_id)
    assert step is not None
    request = tf.DecisionRequest(
        verdict=verdict,
        by="alice",
        step_hash=tf.step_hash(step),
        idempotency_key=f"{step_id}-{verdict}",
        **fields,  # type: ignore[arg-type]
    )
    return with_status(task, tf.decide(task, step_id, request, T0, org=STRICT))


def start(task: AgenticTask, step_id: str) -> AgenticTask:
    return with_status(task, tf.start_execution(task, step_id, T0))


def finish(task: AgenticTask, step_id: str, **how: object) -> AgenticTask:
    return with_status(task, tf.finish_execution(task, step_id, T0, **how))  # type: ignore[arg-type]


def seen(task: AgenticTask, now: datetime = T0) -> tuple[str, list[tuple[str, int, str, str]]]:
    """(the task's seed status, [(step id, order, seed status, state)]) as the read model
    shows them, the phase derived as before the operator's first pass."""
    phase = tf.derive_phase(task, now)
    steps = [(s.step_id, s.order, s.status.value, s.state.value) for s in seed_steps(task, now)]
    return seed_status(task, phase, now).value, steps


def test_every_step_state_and_phase_has_a_seed_status() -> None:
    assert set(STEP_STATUS) == set(StepState)
    expected = {
        "Pending": "pending",
        "Escalated": "pending",
        "Expired": "pending",
        "AwaitingClient": "pending",  # approved by the experts, not confirmed by the client
        "Approved": "approved",
        "Executing": "approved",
        "OutcomeUnknown": "approved",
        "Executed": "executed",
        "Failed": "failed",
        "Rejected": "rejected",
    }
    assert {state.value: step_status(state).value for state in StepState} == expected
    assert {s.value for s in SeedStepStatus} == {
        "pending",
        "approved",
        "rejected",
        "executed",
        "failed",
    }
    assert {phase.value: task_status(phase, None).value for phase in TaskPhase} == {
        "PendingApproval": "pending_approval",
        "InProgress": "in_progress",
        "Completed": "completed",
        "Rejected": "rejected",
        "Failed": "failed",
        "Cancelled": "cancelled",
        "Expired": "expired",
    }


@pytest.mark.parametrize("ahead", list(StepState))
def test_a_task_in_progress_is_approved_only_while_the_step_ahead_waits_for_the_agent(
    ahead: StepState,
) -> None:
    expected = (
        SeedTaskStatus.APPROVED if ahead is StepState.APPROVED else SeedTaskStatus.IN_PROGRESS
    )
    assert task_status(TaskPhase.IN_PROGRESS, ahead) is expected
    # every other phase says what it is, whatever the step ahead
    assert task_status(TaskPhase.PENDING_APPROVAL, ahead) is SeedTaskStatus.PENDING_APPROVAL


def test_a_plan_from_proposal_to_completion() -> None:
    task = make_task()
    assert seen(task) == (
        "pending_approval",
        [(READ, 1, "pending", "Pending"), (WRITE, 2, "pending", "Pending")],
    )
    task = decide(task, READ, Verdict.APPROVE, feedback="fine")
    assert seen(task) == (
        "approved",
        [(READ, 1, "approved", "Approved"), (WRITE, 2, "pending", "Pending")],
    )
    assert seed_steps(task, T0)[0].expert_feedback == "fine"
    task = start(task, READ)
    assert seen(task) == (
        "in_progress",
        [(READ, 1, "approved", "Executing"), (WRITE, 2, "pending", "Pending")],
    )
    task = finish(task, READ, result={"orders": 3})
    assert seen(task) == (
        "pending_approval",
        [(READ, 1, "executed", "Executed"), (WRITE, 2, "pending", "Pending")],
    )
    task = finish(start(decide(task, WRITE, Verdict.APPROVE), WRITE), WRITE, result={"ok": 1})
    assert seen(task) == (
        "completed",
        [(READ, 1, "executed", "Executed"), (WRITE, 2, "executed", "Executed")],
    )


def test_a_rejected_step_halts_the_plan_with_its_feedback() -> None:
    task = make_task()
    task = finish(start(decide(task, READ, Verdict.APPROVE), READ), READ, result={"ok": 1})
    task = decide(task, WRITE, Verdict.REJECT, feedback="wrong month")
    assert seen(task) == (
        "rejected",
        [(READ, 1, "executed", "Executed"), (WRITE, 2, "rejected", "Rejected")],
    )
    assert [s.expert_feedback for s in seed_steps(task, T0)] == [None, "wrong month"]


def test_a_failed_and_an_unknown_outcome() -> None:
    task = start(decide(make_task(), READ, Verdict.APPROVE), READ)
    failed = finish(task, READ, error="the shop answered 500")
    assert seen(failed) == (
        "failed",
        [(READ, 1, "failed", "Failed"), (WRITE, 2, "pending", "Pending")],
    )
    unknown = finish(task, READ, error="timed out", unknown=True)
    assert seen(unknown) == (
        "pending_approval",
        [(READ, 1, "approved", "OutcomeUnknown"), (WRITE, 2, "pending", "Pending")],
    )


def test_escalated_expired_and_cancelled() -> None:
    policy = TaskPolicy(
        decision_deadline_seconds=600,
        escalation=EscalationPolicy(interval_seconds=300, max_escalations=1),
        on_expiry=OnExpiry.END,
    )
    task = make_task(policy=policy)
    task = with_status(task, tf.tick(task, T0))
    late = T0 + timedelta(seconds=600)
    task = with_status(task, tf.tick(task, late))
    assert seen(task, late) == (
        "pending_approval",
        [(READ, 1, "pending", "Escalated"), (WRITE, 2, "pending", "Pending")],
    )
    last = late + timedelta(seconds=300)
    expired = with_status(task, tf.tick(task, last))
    assert expired.current_status().phase is TaskPhase.EXPIRED
    assert seen(expired, last) == (
        "expired",
        [(READ, 1, "pending", "Expired"), (WRITE, 2, "pending", "Pending")],
    )
    cancelled = with_status(task, tf.cancel(task, late))
    assert seen(cancelled, late)[0] == "cancelled"
