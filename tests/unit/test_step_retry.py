"""Failure as a first-class path in the task's rules (issue 15, item 9): a step whose tool
call failed fails its task; an expert may retry it only where the action catalog says the
action is safe to retry; the retry reopens the task through the same approved-step check as
every execution; an unknown outcome is never retried."""

from __future__ import annotations

from datetime import timedelta

import pytest

from humanwork_core import catalog
from humanwork_core import taskflow as tf
from humanwork_core.resources import (
    AgenticTask,
    ExecutionState,
    Risk,
    StepState,
    TaskPhase,
)
from humanwork_core.resources.agentictask import Outcome

from .factories import T0, action, make_task, with_status
from .test_taskflow import approve

READ = action("look", tool="shopify", parameters={"action": "getOrder", "params": {"id": 1}})
SET = action(
    "set",
    Risk.HIGH,
    tool="shopify",
    parameters={"action": "setInventoryLevel", "params": {"available": 3, "sku": "A"}},
)
ADJUST = action(
    "adjust",
    Risk.HIGH,
    tool="shopify",
    parameters={"action": "adjustInventoryLevel", "params": {"available_adjustment": -3}},
)


def failed(task: AgenticTask, step_id: str, *, unknown: bool = False) -> AgenticTask:
    """Approve `step_id`, start it and let its tool call fail; then the operator ticks."""
    task = approve(task, step_id)
    task = with_status(task, tf.start_execution(task, step_id, T0))
    task = with_status(
        task,
        tf.finish_execution(task, step_id, T0, error="upstream_error: 404", unknown=unknown),
    )
    return with_status(task, tf.tick(task, T0))


def test_the_catalog_marks_reads_and_absolute_writes_safe_to_retry_and_deltas_not() -> None:
    for tool in catalog.TOOLS.values():
        for entry in tool.actions.values():
            if not entry.side_effect:
                assert entry.retry_safe, f"{tool.name}.{entry.name} is a read"
    assert catalog.retry_safe("shopify", "setInventoryLevel")
    assert catalog.retry_safe("amazon", "updateListingQuantity")
    assert not catalog.retry_safe("shopify", "adjustInventoryLevel")
    assert not catalog.retry_safe("shopify", "noSuchAction")
    assert not catalog.retry_safe(None, "getOrder")
    assert catalog.TOOLS["shopify"].to_dict()["actions"][0]["retrySafe"] is True


def test_a_failed_step_fails_the_task_and_it_stays_failed_without_a_retry() -> None:
    task = failed(make_task(READ), "look")
    status = task.current_status()
    assert status.phase is TaskPhase.FAILED
    assert status.step("look").state is StepState.FAILED
    assert status.step("look").execution.error == "upstream_error: 404"  # type: ignore[union-attr]
    later = with_status(task, tf.tick(task, T0 + timedelta(hours=1)))
    assert later.current_status().phase is TaskPhase.FAILED  # absorbing
    assert tf.executable_step(later) is None
    with pytest.raises(tf.TaskTerminal):
        tf.start_execution(later, "look", T0)


@pytest.mark.parametrize("step", [READ, SET], ids=["read", "absolute-write"])
def test_a_retry_reopens_the_task_and_the_agent_runs_the_step_once_more(step: object) -> None:
    task = failed(make_task(step), step.id)  # type: ignore[attr-defined]
    sid = step.id  # type: ignore[attr-defined]
    after = tf.retry(task, sid, by="bob", note="store back", now=T0)
    retried = with_status(task, after)
    entry = retried.current_status().step(sid)
    assert entry.resolution is not None
    assert (entry.resolution.outcome, entry.resolution.attempt) == (Outcome.RETRY, 1)
    assert tf.is_retried(entry) and tf.reopened(retried)
    # the same retry again changes nothing
    assert tf.retry(retried, sid, by="bob", note=None, now=T0) == after
    # the platform writes only the resolution, the agent nothing of it
    assert "resolution" in str(tf.owned_status(after, tf.Writer.PLATFORM_API))
    # the agent waits until the operator reopens the task
    assert tf.executable_step(retried) is None
    ticked = with_status(retried, tf.tick(retried, T0))
    assert ticked.current_status().phase is TaskPhase.IN_PROGRESS
    assert ticked.current_status().completed_at is None
    assert ticked.current_status().step(sid).state is StepState.APPROVED
    assert tf.executable_step(ticked) is not None
    again = with_status(ticked, tf.start_execution(ticked, sid, T0))
    assert again.current_status().step(sid).execution.attempt == 2  # type: ignore[union-attr]
    done = with_status(again, tf.finish_execution(again, sid, T0, result={"ok": 1}))
    done = with_status(done, tf.tick(done, T0))
    assert done.current_status().phase is TaskPhase.COMPLETED


def test_a_second_failure_after_a_retry_fails_the_task_again() -> None:
    task = failed(make_task(READ), "look")
    task = with_status(task, tf.retry(task, "look", by="bob", note=None, now=T0))
    task = with_status(task, tf.tick(task, T0))
    task = with_status(task, tf.start_execution(task, "look", T0))
    task = with_status(task, tf.finish_execution(task, "look", T0, error="upstream_error: 500"))
    task = with_status(task, tf.tick(task, T0))
    assert task.current_status().phase is TaskPhase.FAILED
    assert not tf.reopened(task)
    # and may be retried again, for the new attempt
    after = tf.retry(task, "look", by="bob", note=None, now=T0)
    assert after.step("look").resolution.attempt == 2  # type: ignore[union-attr]


def test_a_write_that_is_not_idempotent_is_never_retried() -> None:
    task = failed(make_task(ADJUST), "adjust")
    with pytest.raises(tf.NotRetrySafe) as refused:
        tf.retry(task, "adjust", by="bob", note=None, now=T0)
    assert refused.value.code == "step_not_retryable"
    assert task.current_status().phase is TaskPhase.FAILED


def test_an_unknown_outcome_is_never_retried_blindly() -> None:
    task = failed(make_task(SET), "set", unknown=True)
    assert task.current_status().step("set").execution.state is (  # type: ignore[union-attr]
        ExecutionState.OUTCOME_UNKNOWN
    )
    with pytest.raises(tf.NotFailed) as refused:
        tf.retry(task, "set", by="bob", note=None, now=T0)
    assert refused.value.code == "step_not_failed"
    # nor can a resolution be dressed up as a retry
    with pytest.raises(tf.NotUnknown):
        tf.resolve(task, "set", Outcome.RETRY, by="bob", note=None, now=T0)


def test_a_step_that_did_not_fail_cannot_be_retried() -> None:
    task = approve(make_task(READ), "look")
    with pytest.raises(tf.NotFailed):
        tf.retry(task, "look", by="bob", note=None, now=T0)
    running = with_status(task, tf.start_execution(task, "look", T0))
    with pytest.raises(tf.NotFailed):
        tf.retry(running, "look", by="bob", note=None, now=T0)


def test_a_retry_goes_through_the_approved_step_check() -> None:
    task = failed(make_task(READ), "look")
    entry = task.current_status().step("look")
    assert entry.decision is not None
    forged = entry.model_copy(
        update={"decision": entry.decision.model_copy(update={"step_hash": "0" * 64})}
    )
    tampered = with_status(task, task.current_status().with_step(forged))
    with pytest.raises(tf.StepHashMismatch):
        tf.retry(tampered, "look", by="bob", note=None, now=T0)


def test_a_cancelled_task_is_not_reopened_by_a_retry() -> None:
    task = failed(make_task(READ), "look")
    cancelled = with_status(
        task, task.current_status().model_copy(update={"phase": TaskPhase.CANCELLED})
    )
    with pytest.raises(tf.TaskTerminal):
        tf.retry(cancelled, "look", by="bob", note=None, now=T0)


def test_a_task_awaiting_a_retry_stays_for_the_retry_window_before_it_is_deleted() -> None:
    from agent_operator.config import OperatorSettings
    from agent_operator.tasks import ttl_of

    settings = OperatorSettings(task_ttl_seconds=3, retry_window_seconds=3600)
    read = failed(make_task(READ), "look")
    assert tf.awaiting_retry(read) is not None
    assert ttl_of(read, settings) == 3600
    delta = failed(make_task(ADJUST), "adjust")
    assert tf.awaiting_retry(delta) is None  # not safe to retry: nothing to wait for
    assert ttl_of(delta, settings) == 3
    retried = with_status(read, tf.retry(read, "look", by="bob", note=None, now=T0))
    assert tf.awaiting_retry(retried) is None
    done = approve(make_task(READ), "look")
    done = with_status(done, tf.start_execution(done, "look", T0))
    done = with_status(done, tf.finish_execution(done, "look", T0, result={"ok": 1}))
    assert ttl_of(with_status(done, tf.tick(done, T0)), settings) == 3


def test_a_retried_task_is_never_deleted_before_the_operator_reopens_it() -> None:
    from agent_operator.tasks import ARCHIVED_ANNOTATION, expired_ttl

    task = failed(make_task(READ), "look")
    archived = task.model_copy(
        update={
            "metadata": task.metadata.model_copy(
                update={"annotations": {ARCHIVED_ANNOTATION: "true"}}
            )
        }
    )
    later = T0 + timedelta(hours=2)
    assert expired_ttl(archived, 3, later)
    retried = with_status(archived, tf.retry(archived, "look", by="bob", note=None, now=T0))
    assert not expired_ttl(retried, 3, later)
