"""The client's confirmation in the task's rules: a step that needs it executes only when
approved AND confirmed (either order), a confirmation is bound to the step with its amended
parameters (an expert's edit voids it, a replay of it is refused), a decline halts the task
like a rejection, the step's deadline covers the wait for the client, and only the
platform's field carries it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from humanwork_core import taskflow as tf
from humanwork_core.policy import STRICT
from humanwork_core.resources import (
    AgenticTask,
    ConfirmationState,
    EscalationPolicy,
    OnExpiry,
    Risk,
    StepState,
    TaskPhase,
    TaskPolicy,
    Verdict,
)

from .factories import T0, action, make_task, with_status

READ, WRITE = "read", "write"
CLIENT = "carol@acme.example"


def plan(policy: TaskPolicy | None = None) -> AgenticTask:
    """A read (low) then a write (high) that the initiating client must confirm."""
    task = make_task(
        action(READ),
        action(WRITE, Risk.HIGH, parameters={"action": "set", "params": {"qty": 5}}),
        policy=policy,
    )
    return with_status(task, tf.require_confirmation(task, [WRITE]))


def decide(task: AgenticTask, step_id: str, verdict: Verdict, **fields: Any) -> AgenticTask:
    step = task.step(step_id)
    assert step is not None
    request = tf.DecisionRequest(
        verdict=verdict,
        by=fields.pop("by", "alice"),
        step_hash=tf.step_hash(step),
        idempotency_key=f"{step_id}-{verdict.value}",
        **fields,
    )
    return with_status(task, tf.decide(task, step_id, request, T0, org=STRICT))


def shown_hash(task: AgenticTask, step_id: str) -> str:
    step = task.step(step_id)
    assert step is not None
    return tf.confirmation_hash(step, task.current_status().step(step_id))


def confirm(task: AgenticTask, step_id: str = WRITE, digest: str | None = None) -> AgenticTask:
    digest = digest or shown_hash(task, step_id)
    return with_status(task, tf.confirm(task, step_id, by=CLIENT, step_hash=digest, now=T0))


def run(task: AgenticTask, step_id: str) -> AgenticTask:
    task = with_status(task, tf.start_execution(task, step_id, T0))
    return with_status(task, tf.finish_execution(task, step_id, T0, result={"ok": 1}))


def at_write(task: AgenticTask | None = None) -> AgenticTask:
    """The read approved and run: the write is next."""
    task = task or plan()
    return run(decide(task, READ, Verdict.APPROVE), READ)


def test_require_records_waiting_only_where_named_and_never_weakens() -> None:
    task = plan()
    record = task.current_status().step(WRITE).confirmation
    assert record is not None and record.required and record.state is ConfirmationState.WAITING
    assert task.current_status().step(READ).confirmation is None
    confirmed = confirm(task)
    again = tf.require_confirmation(confirmed, [WRITE])  # a second look changes nothing
    assert again == confirmed.current_status()


def test_approved_but_unconfirmed_step_does_not_execute() -> None:
    task = decide(at_write(), WRITE, Verdict.APPROVE)
    assert tf.executable_step(task) is None  # the agent waits
    with pytest.raises(tf.NotConfirmed):
        tf.start_execution(task, WRITE, T0)
    with pytest.raises(tf.NotConfirmed):
        tf.authorize_tool_call(
            task,
            WRITE,
            tool="shopify_query",
            parameters={"action": "set", "params": {"qty": 5}},
            now=T0,
        )
    assert tf.derive_phase(task, T0) is TaskPhase.PENDING_APPROVAL
    assert tf.step_state(task, WRITE, T0) is StepState.AWAITING_CLIENT
    assert tf.client_wait_step(task) is not None


@pytest.mark.parametrize("confirm_first", [True, False])
def test_approved_and_confirmed_in_either_order_executes(confirm_first: bool) -> None:
    task = at_write()
    if confirm_first:
        task = confirm(task)
        assert tf.executable_step(task) is None  # confirmed, not approved: still waits
        task = decide(task, WRITE, Verdict.APPROVE)
    else:
        task = confirm(decide(task, WRITE, Verdict.APPROVE))
    step = tf.executable_step(task)
    assert step is not None and step.id == WRITE
    done = run(task, WRITE)
    assert tf.derive_phase(done, T0) is TaskPhase.COMPLETED


def test_a_step_not_needing_confirmation_runs_on_approval_alone() -> None:
    task = make_task(action(READ), action(WRITE, Risk.HIGH))  # no record: not required
    task = at_write(task)
    task = decide(task, WRITE, Verdict.APPROVE)
    step = tf.executable_step(task)
    assert step is not None and step.id == WRITE


def test_an_experts_edit_voids_an_earlier_confirmation_and_refuses_its_replay() -> None:
    task = at_write()
    seen = shown_hash(task, WRITE)
    task = confirm(task, digest=seen)
    edited = decide(task, WRITE, Verdict.EDIT, parameters={"action": "set", "params": {"qty": 500}})
    assert shown_hash(edited, WRITE) != seen  # the client is shown the new values
    assert tf.executable_step(edited) is None
    assert tf.step_state(edited, WRITE, T0) is StepState.AWAITING_CLIENT
    with pytest.raises(tf.NotConfirmed):
        tf.start_execution(edited, WRITE, T0)
    with pytest.raises(tf.ConfirmationStale):  # the same confirmation replayed after the edit
        tf.confirm(edited, WRITE, by=CLIENT, step_hash=seen, now=T0)
    reconfirmed = confirm(edited)  # positive control: confirming the new values
    step = tf.executable_step(reconfirmed)
    assert step is not None and step.id == WRITE


def test_a_decline_halts_the_task_like_a_rejection() -> None:
    task = decide(at_write(), WRITE, Verdict.APPROVE)
    declined = with_status(
        task, tf.decline(task, WRITE, by=CLIENT, reason="not this quantity", now=T0)
    )
    assert tf.derive_phase(declined, T0) is TaskPhase.REJECTED
    assert tf.step_state(declined, WRITE, T0) is StepState.REJECTED
    assert tf.executable_step(declined) is None
    with pytest.raises(tf.TaskTerminal):
        tf.start_execution(declined, WRITE, T0)
    with pytest.raises(tf.StepDeclined):
        tf.confirm(declined, WRITE, by=CLIENT, step_hash=shown_hash(declined, WRITE), now=T0)


def test_confirming_a_step_that_needs_none_or_already_ran_is_refused() -> None:
    task = at_write()
    with pytest.raises(tf.ConfirmationNotRequired):
        tf.confirm(task, READ, by=CLIENT, step_hash=shown_hash(task, READ), now=T0)
    running = with_status(
        confirm(decide(task, WRITE, Verdict.APPROVE)),
        tf.start_execution(confirm(decide(task, WRITE, Verdict.APPROVE)), WRITE, T0),
    )
    with pytest.raises(tf.StepConfirmationClosed):
        tf.decline(running, WRITE, by=CLIENT, reason="too late", now=T0)


def test_confirming_the_same_version_twice_changes_nothing() -> None:
    task = confirm(at_write())
    assert tf.confirm(task, WRITE, by=CLIENT, step_hash=shown_hash(task, WRITE), now=T0) == (
        task.current_status()
    )


def test_the_deadline_covers_the_wait_for_the_client() -> None:
    policy = TaskPolicy(
        decision_deadline_seconds=60,
        escalation=EscalationPolicy(interval_seconds=60, max_escalations=1),
        on_expiry=OnExpiry.END,
    )
    task = at_write(plan(policy))
    task = with_status(task, tf.tick(task, T0))
    task = decide(task, WRITE, Verdict.APPROVE)
    task = with_status(task, tf.tick(task, T0))
    deadline = task.current_status().step(WRITE).deadline
    assert deadline is not None and task.current_status().next_deadline == deadline
    later = T0 + timedelta(seconds=61)
    task = with_status(task, tf.tick(task, later))  # missed: escalated, new deadline
    assert task.current_status().step(WRITE).escalations == 1
    assert task.current_status().step(WRITE).state is StepState.AWAITING_CLIENT
    end = later + timedelta(seconds=61)
    task = with_status(task, tf.tick(task, end))
    assert task.current_status().phase is TaskPhase.EXPIRED


def test_only_the_platform_writes_the_confirmation() -> None:
    task = confirm(at_write())
    status = task.current_status()
    assert "confirmation" in tf.STEP_FIELDS[tf.Writer.PLATFORM_API]
    agent_part = tf.owned_status(status, tf.Writer.AGENT)
    operator_part = tf.owned_status(status, tf.Writer.OPERATOR)
    platform_part = tf.owned_status(status, tf.Writer.PLATFORM_API)
    assert all("confirmation" not in s for s in agent_part.get("steps", []))
    assert all("confirmation" not in s for s in operator_part.get("steps", []))
    assert any("confirmation" in s for s in platform_part["steps"])
