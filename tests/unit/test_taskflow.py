"""The task state machine: example tests for each rule, then property-based tests that drive
random plans through random event sequences and check the invariants after every event."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from humanwork_core import taskflow as tf
from humanwork_core.policy import STRICT, OrgPolicy, effective_risk
from humanwork_core.resources import (
    AgenticTask,
    AgenticTaskStatus,
    Decision,
    EscalationPolicy,
    ExecutionState,
    OnExpiry,
    RequiredApprovals,
    Risk,
    Step,
    StepKind,
    StepState,
    TaskPhase,
    TaskPolicy,
    Verdict,
)
from humanwork_core.resources.agentictask import Outcome

from .factories import T0, action, input_step, make_task, with_status

READ, WRITE = "read", "write"


def approve(task: AgenticTask, step_id: str, by: str = "alice", key: str | None = None) -> Any:
    step = task.step(step_id)
    assert step is not None
    request = tf.DecisionRequest(
        verdict=Verdict.APPROVE,
        by=by,
        step_hash=tf.step_hash(step),
        idempotency_key=key or f"{step_id}-{by}",
    )
    return with_status(task, tf.decide(task, step_id, request, T0, org=STRICT))


def run(task: AgenticTask, step_id: str, error: str | None = None) -> AgenticTask:
    task = with_status(task, tf.start_execution(task, step_id, T0))
    return with_status(task, tf.finish_execution(task, step_id, T0, result={"ok": 1}, error=error))


def request_for(step: Step, verdict: Verdict, by: str = "alice", **fields: Any) -> Any:
    return tf.DecisionRequest(
        verdict=verdict,
        by=by,
        step_hash=tf.step_hash(step),
        idempotency_key=f"{step.id}-{by}-{verdict}",
        **fields,
    )


# --- step_hash -----------------------------------------------------------------------------


def test_step_hash_is_a_pinned_sha256_of_the_canonical_step() -> None:
    step = action("fetch", Risk.LOW, parameters={"b": 2, "a": [1, "x"]})
    canonical = (
        b'{"description":"do fetch","id":"fetch","kind":"action",'
        b'"parameters":{"a":[1,"x"],"b":2},"risk":"low","tool":"shopify_query"}'
    )
    # Pinned: the hash is part of the contract between the writers; it must not drift.
    pinned = "2bbc178fdb21a98c6aac26eb4511b0e63498f79f513024fb01b29709bdad8e2f"
    assert hashlib.sha256(canonical).hexdigest() == pinned
    assert tf.step_hash(step) == pinned


def test_step_hash_ignores_key_order_and_integral_floats() -> None:
    first = action("fetch", parameters={"a": 1, "b": {"c": 2.0}})
    second = action("fetch", parameters={"b": {"c": 2}, "a": 1.0})
    assert tf.step_hash(first) == tf.step_hash(second)


@pytest.mark.parametrize(
    "change",
    [
        {"id": "other"},
        {"description": "something else"},
        {"tool": "amazon_query"},
        {"parameters": {"action": "fetch", "extra": True}},
        {"risk": Risk.CRITICAL},
    ],
)
def test_step_hash_changes_with_every_approved_field(change: dict[str, Any]) -> None:
    base = action("fetch")
    assert tf.step_hash(base) != tf.step_hash(base.model_copy(update=change))


def test_step_hash_covers_kind_and_options() -> None:
    first = input_step("pick", options=("a", "b"))
    assert tf.step_hash(first) != tf.step_hash(input_step("pick", options=("a", "c")))
    assert tf.step_hash(input_step("pick")) != tf.step_hash(
        input_step("pick").model_copy(update={"kind": StepKind.ACTION})
    )


def test_canonical_json_is_compact_sorted_and_refuses_nan() -> None:
    assert tf.canonical_json({"b": 1, "a": [1.5, 2.0, "é"]}) == '{"a":[1.5,2,"é"],"b":1}'.encode()
    with pytest.raises(ValueError):
        tf.canonical_json({"x": float("nan")})


# --- who may decide what, when -------------------------------------------------------------


def test_only_the_first_undecided_step_is_decidable() -> None:
    task = make_task()
    decidable = tf.decidable_step(task)
    assert decidable is not None and decidable.id == READ
    write = task.step(WRITE)
    assert write is not None
    with pytest.raises(tf.StepNotDecidable) as caught:
        tf.decide(task, WRITE, request_for(write, Verdict.APPROVE), T0, org=STRICT)
    assert caught.value.code == "step_not_decidable"


def test_next_step_is_decidable_only_after_the_previous_executed() -> None:
    task = approve(make_task(), READ)
    assert tf.decidable_step(task) is None
    write = task.step(WRITE)
    assert write is not None
    with pytest.raises(tf.StepNotDecidable):
        tf.decide(task, WRITE, request_for(write, Verdict.APPROVE), T0, org=STRICT)
    task = run(task, READ)
    decidable = tf.decidable_step(task)
    assert decidable is not None and decidable.id == WRITE


def test_approval_records_the_decision_and_touches_nothing_else() -> None:
    task = make_task()
    before = task.current_status()
    after = approve(task, READ).current_status()
    entry = after.step(READ)
    assert entry.decision is not None
    assert entry.decision.verdict is Verdict.APPROVE and entry.decision.by == "alice"
    assert entry.decision.at == T0
    assert entry.decision.step_hash == tf.step_hash(task.spec.steps[0])
    assert [a.by for a in entry.approvals] == ["alice"]
    assert after.phase == before.phase and after.step(WRITE) == before.step(WRITE)
    assert tf.owned_status(after, tf.Writer.AGENT) == {}


def test_unknown_step_is_refused() -> None:
    with pytest.raises(tf.StepNotFound):
        tf.decide(make_task(), "nope", request_for(action("nope"), Verdict.APPROVE), T0, org=STRICT)


def test_decision_on_another_version_of_the_step_is_refused() -> None:
    task = make_task()
    stale = action(READ, parameters={"action": "something else"})
    with pytest.raises(tf.StepHashMismatch) as caught:
        tf.decide(task, READ, request_for(stale, Verdict.APPROVE), T0, org=STRICT)
    assert caught.value.code == "step_hash_mismatch"


def test_rejection_halts_the_task() -> None:
    task = make_task()
    read = task.step(READ)
    assert read is not None
    rejected = with_status(
        task,
        tf.decide(
            task, READ, request_for(read, Verdict.REJECT, feedback="wrong month"), T0, org=STRICT
        ),
    )
    entry = rejected.current_status().step(READ)
    assert entry.decision is not None and entry.decision.feedback == "wrong month"
    assert entry.approvals == ()
    assert tf.derive_phase(rejected, T0) is TaskPhase.REJECTED
    assert tf.decidable_step(rejected) is None
    assert tf.executable_step(rejected) is None
    with pytest.raises(tf.TaskTerminal):
        tf.start_execution(rejected, READ, T0)
    with pytest.raises(tf.TaskTerminal) as caught:
        tf.decide(rejected, READ, request_for(read, Verdict.APPROVE, by="bob"), T0, org=STRICT)
    assert caught.value.code == "task_terminal"


def test_a_decided_step_cannot_be_decided_again() -> None:
    task = approve(make_task(), READ)
    read = task.step(READ)
    assert read is not None
    with pytest.raises(tf.StepAlreadyDecided):
        tf.decide(task, READ, request_for(read, Verdict.REJECT, by="bob"), T0, org=STRICT)


def test_a_retried_decision_is_a_no_op_and_a_reused_key_is_refused() -> None:
    task = approve(make_task(), READ, key="k-1")
    again = approve(task, READ, key="k-1")
    assert again.current_status() == task.current_status()
    read = task.step(READ)
    assert read is not None
    reused = tf.DecisionRequest(
        verdict=Verdict.REJECT, by="alice", step_hash=tf.step_hash(read), idempotency_key="k-1"
    )
    with pytest.raises(tf.IdempotencyConflict):
        tf.decide(task, READ, reused, T0, org=STRICT)


def test_critical_steps_need_two_distinct_approvers() -> None:
    task = make_task(action("drop", Risk.CRITICAL))
    once = approve(task, "drop", by="alice")
    entry = once.current_status().step("drop")
    assert entry.decision is None and len(entry.approvals) == 1
    assert tf.derive_phase(once, T0) is TaskPhase.PENDING_APPROVAL
    with pytest.raises(tf.NotApproved):
        tf.start_execution(once, "drop", T0)
    with pytest.raises(tf.DuplicateApprover) as caught:
        approve(once, "drop", by="alice", key="another-key")
    assert caught.value.code == "duplicate_approver"
    twice = approve(once, "drop", by="bob")
    entry = twice.current_status().step("drop")
    assert entry.decision is not None and entry.decision.by == "bob"
    assert [a.by for a in entry.approvals] == ["alice", "bob"]
    assert tf.derive_phase(twice, T0) is TaskPhase.IN_PROGRESS


def test_quorum_is_configurable_per_risk() -> None:
    low = make_task(action("read"), policy=TaskPolicy(required_approvals=RequiredApprovals(low=3)))
    assert tf.required_approvals(low, low.spec.steps[0], STRICT) == 3
    critical = make_task(action("wipe", Risk.CRITICAL))
    assert tf.required_approvals(critical, critical.spec.steps[0], STRICT) == 2
    high = make_task(action("write", Risk.HIGH))
    assert tf.required_approvals(high, high.spec.steps[0], STRICT) == 1


def test_the_org_quorum_is_a_floor_the_task_cannot_lower() -> None:
    org = OrgPolicy(required_approvals=RequiredApprovals(high=2))
    task = make_task(action("write", Risk.HIGH))
    step = task.spec.steps[0]
    assert tf.required_approvals(task, step, org) == 2
    once = with_status(
        task, tf.decide(task, "write", request_for(step, Verdict.APPROVE), T0, org=org)
    )
    assert once.current_status().step("write").decision is None  # a second expert is needed
    stricter = make_task(
        action("write", Risk.HIGH),
        policy=TaskPolicy(required_approvals=RequiredApprovals(high=3)),
    )
    assert tf.required_approvals(stricter, stricter.spec.steps[0], org) == 3


def test_quorum_follows_the_catalog_risk_not_the_declared_one() -> None:
    """A write declared low (only possible around the API server's CEL rule) still needs
    the quorum of its catalog minimum."""
    org = OrgPolicy(required_approvals=RequiredApprovals(high=2))
    write = action(
        "adjust", Risk.LOW, tool="shopify", parameters={"action": "adjustInventoryLevel"}
    )
    task = make_task(write)
    assert effective_risk(write) is Risk.HIGH
    assert tf.required_approvals(task, write, org) == 2
    assert tf.highest_pending_risk(task, T0) is Risk.HIGH


def test_an_edit_cannot_swap_the_action() -> None:
    read = action("look", tool="shopify", parameters={"action": "getOrder", "params": {"id": 1}})
    task = make_task(read)
    swapped = {"action": "adjustInventoryLevel", "params": {"available_adjustment": -30}}
    with pytest.raises(tf.EditChangesAction) as caught:
        tf.decide(task, "look", request_for(read, Verdict.EDIT, parameters=swapped), T0, org=STRICT)
    assert caught.value.code == "edit_changes_action"
    same = {"action": "getOrder", "params": {"id": 2}}
    edited = tf.decide(
        task, "look", request_for(read, Verdict.EDIT, parameters=same), T0, org=STRICT
    )
    assert edited.step("look").decision is not None


def test_approvals_must_agree_on_the_amendment() -> None:
    task = make_task(action("drop", Risk.CRITICAL))
    drop = task.step("drop")
    assert drop is not None
    edited = with_status(
        task,
        tf.decide(
            task,
            "drop",
            request_for(drop, Verdict.EDIT, parameters={"action": "drop", "n": 1}),
            T0,
            org=STRICT,
        ),
    )
    with pytest.raises(tf.ApprovalConflict):
        tf.decide(edited, "drop", request_for(drop, Verdict.APPROVE, by="bob"), T0, org=STRICT)
    agreed = tf.decide(
        edited,
        "drop",
        request_for(drop, Verdict.EDIT, by="bob", parameters={"action": "drop", "n": 1.0}),
        T0,
        org=STRICT,
    )
    assert agreed.step("drop").decision is not None


@pytest.mark.parametrize(
    ("step", "verdict", "fields"),
    [
        (action("a"), Verdict.PROVIDE, {"input": {"x": 1}}),
        (action("a"), Verdict.SELECT, {"selection": "x"}),
        (input_step("a"), Verdict.APPROVE, {}),
        (input_step("a"), Verdict.SELECT, {"selection": "x"}),
        (input_step("a", options=("x", "y")), Verdict.PROVIDE, {"input": {"x": 1}}),
        (input_step("a", options=("x", "y")), Verdict.SELECT, {"selection": "z"}),
        (action("a"), Verdict.EDIT, {}),
    ],
)
def test_verdicts_must_fit_the_step(step: Step, verdict: Verdict, fields: dict[str, Any]) -> None:
    task = make_task(step)
    with pytest.raises(tf.InvalidDecision) as caught:
        tf.decide(task, "a", request_for(step, verdict, **fields), T0, org=STRICT)
    assert caught.value.code == "invalid_decision"


def test_select_and_provide_decide_input_steps() -> None:
    choose = input_step("choose", options=("fifo", "lifo"))
    ask = input_step("ask")
    task = make_task(choose, ask)
    task = with_status(
        task,
        tf.decide(
            task, "choose", request_for(choose, Verdict.SELECT, selection="lifo"), T0, org=STRICT
        ),
    )
    decision = task.current_status().step("choose").decision
    assert decision is not None and decision.selection == "lifo"
    task = run(task, "choose")
    task = with_status(
        task,
        tf.decide(
            task, "ask", request_for(ask, Verdict.PROVIDE, input={"sku": "A1"}), T0, org=STRICT
        ),
    )
    decision = task.current_status().step("ask").decision
    assert decision is not None and decision.input == {"sku": "A1"}


def test_edit_changes_what_the_tool_may_be_called_with() -> None:
    task = make_task(action("adjust", parameters={"action": "adjust", "qty": 14}))
    adjust = task.step("adjust")
    assert adjust is not None
    task = with_status(
        task,
        tf.decide(
            task,
            "adjust",
            request_for(adjust, Verdict.EDIT, parameters={"action": "adjust", "qty": 7}),
            T0,
            org=STRICT,
        ),
    )
    assert tf.authorize_tool_call(
        task, "adjust", tool="shopify_query", parameters={"action": "adjust", "qty": 7}, now=T0
    ) == {"action": "adjust", "qty": 7}
    with pytest.raises(tf.ToolCallMismatch):
        tf.authorize_tool_call(
            task, "adjust", tool="shopify_query", parameters={"action": "adjust", "qty": 14}, now=T0
        )
    with pytest.raises(tf.ToolCallMismatch):
        tf.authorize_tool_call(
            task, "adjust", tool="amazon_query", parameters={"action": "adjust", "qty": 7}, now=T0
        )


def test_tool_calls_need_an_approval_and_order() -> None:
    task = make_task()
    with pytest.raises(tf.NotApproved) as caught:
        tf.authorize_tool_call(
            task, READ, tool="shopify_query", parameters={"action": READ}, now=T0
        )
    assert caught.value.code == "not_approved"
    task = run(approve(task, READ), READ)
    with pytest.raises(tf.ExecutionConflict):
        tf.authorize_tool_call(
            task, READ, tool="shopify_query", parameters={"action": READ}, now=T0
        )


# --- auto-approval -------------------------------------------------------------------------


OPTED_IN = OrgPolicy(auto_approve_low=True)
CATALOG_READ = {"action": "getOrder", "params": {"id": 1}}


def test_nothing_auto_approves_by_default() -> None:
    assert tf.auto_approve(make_task(), T0, org=STRICT) is None
    read = action("read", tool="shopify", parameters=CATALOG_READ)
    asked = make_task(read, policy=TaskPolicy(auto_approve=(Risk.LOW,)))
    assert tf.auto_approve(asked, T0, org=STRICT) is None  # the org did not opt in
    assert tf.auto_approve(make_task(read), T0, org=OPTED_IN) is None  # the task did not ask


def test_policy_auto_approves_catalog_reads_where_org_and_task_agree() -> None:
    policy = TaskPolicy(auto_approve=(Risk.LOW,))
    read = action("read", tool="shopify", parameters=CATALOG_READ)
    write = action(
        "write",
        Risk.HIGH,
        tool="shopify",
        parameters={"action": "setInventoryLevel", "params": {"available": 1}},
    )
    task = make_task(read, write, policy=policy)
    status = tf.auto_approve(task, T0, org=OPTED_IN)
    assert status is not None
    decision = status.step("read").decision
    assert decision is not None and decision.by == tf.AUTO_APPROVER
    assert decision.step_hash == tf.step_hash(task.spec.steps[0])
    task = run(with_status(task, status), "read")
    assert tf.auto_approve(task, T0, org=OPTED_IN) is None  # the write waits for a human
    assert tf.auto_approve(make_task(input_step("ask"), policy=policy), T0, org=OPTED_IN) is None


@pytest.mark.parametrize(
    "step",
    [
        # the attack: a write declared low
        action(
            "w",
            Risk.LOW,
            tool="shopify",
            parameters={
                "action": "adjustInventoryLevel",
                "params": {"available_adjustment": -30},
            },
        ),
        action("u", Risk.LOW, tool="shopify", parameters={"action": "noSuchAction"}),
        action("t", Risk.LOW, tool="unknown_tool", parameters={"action": "getOrder"}),
        action("m", Risk.MEDIUM, tool="shopify", parameters=CATALOG_READ),
    ],
    ids=["write-declared-low", "unknown-action", "unknown-tool", "read-declared-medium"],
)
def test_only_known_reads_of_effective_low_risk_auto_approve(step: Step) -> None:
    task = make_task(step, policy=TaskPolicy(auto_approve=(Risk.LOW,)))
    assert tf.auto_approve(task, T0, org=OPTED_IN) is None


def test_high_risk_cannot_be_auto_approved_and_the_name_is_reserved() -> None:
    with pytest.raises(ValueError, match="auto-approved"):
        TaskPolicy(auto_approve=(Risk.HIGH,))
    task = make_task()
    read = task.step(READ)
    assert read is not None
    with pytest.raises(tf.InvalidDecision):
        tf.decide(
            task, READ, request_for(read, Verdict.APPROVE, by=tf.AUTO_APPROVER), T0, org=STRICT
        )


# --- deadlines, escalation, expiry ---------------------------------------------------------

POLICY = TaskPolicy(
    decision_deadline_seconds=600,
    escalation=EscalationPolicy(interval_seconds=300, max_escalations=2),
)


def test_tick_sets_the_deadline_of_the_awaited_decision() -> None:
    status = tf.tick(make_task(policy=POLICY), T0)
    assert status.phase is TaskPhase.PENDING_APPROVAL
    assert status.step(READ).deadline == T0 + timedelta(seconds=600)
    assert status.step(WRITE).deadline is None
    assert status.next_deadline == T0 + timedelta(seconds=600)
    assert status.current_step == READ
    assert status.highest_pending_risk is Risk.HIGH
    assert status.started_at == T0 and status.observed_generation == 1
    assert [s.state for s in status.steps] == [StepState.PENDING, StepState.PENDING]


def test_missed_deadlines_escalate_then_expire() -> None:
    task = make_task(policy=POLICY.model_copy(update={"on_expiry": OnExpiry.END}))
    task = with_status(task, tf.tick(task, T0))
    late = T0 + timedelta(seconds=600)
    task = with_status(task, tf.tick(task, late))
    entry = task.current_status().step(READ)
    assert entry.escalations == 1 and entry.state is StepState.ESCALATED
    assert entry.deadline == late + timedelta(seconds=300)
    # still decidable while escalated
    assert tf.decidable_step(task) is not None
    approve(task, READ)
    later = late + timedelta(seconds=300)
    task = with_status(task, tf.tick(task, later))
    assert task.current_status().step(READ).escalations == 2
    last = later + timedelta(seconds=300)
    task = with_status(task, tf.tick(task, last))
    status = task.current_status()
    assert status.phase is TaskPhase.EXPIRED and status.completed_at == last
    assert status.step(READ).state is StepState.EXPIRED
    with pytest.raises(tf.HumanTaskExpired) as caught:
        approve(task, READ)
    assert caught.value.code == "human_task_expired"
    assert tf.tick(task, last + timedelta(days=1)) == status


def test_deciding_past_the_last_deadline_is_refused_before_the_operator_notices() -> None:
    policy = TaskPolicy(
        decision_deadline_seconds=60,
        escalation=EscalationPolicy(max_escalations=0),
        on_expiry=OnExpiry.END,
    )
    task = make_task(policy=policy)
    task = with_status(task, tf.tick(task, T0))
    read = task.step(READ)
    assert read is not None
    with pytest.raises(tf.HumanTaskExpired):
        tf.decide(
            task, READ, request_for(read, Verdict.APPROVE), T0 + timedelta(seconds=60), org=STRICT
        )
    assert tf.derive_phase(task, T0 + timedelta(seconds=60)) is TaskPhase.EXPIRED
    in_time = tf.decide(
        task, READ, request_for(read, Verdict.APPROVE), T0 + timedelta(seconds=59), org=STRICT
    )
    assert in_time.step(READ).decision is not None


def test_by_default_an_expired_decision_keeps_the_task_blocked_until_reopened() -> None:
    """Seed 001: too late, the run stays blocked for a fresh escalation (onExpiry
    AwaitReopen, the default): the step is Expired and undecidable, the task waits in
    PendingApproval with no deadline ahead; a reopening gives the step a new deadline,
    decidable again until it passes, and it can be reopened again after that."""
    policy = TaskPolicy(
        decision_deadline_seconds=60, escalation=EscalationPolicy(max_escalations=0)
    )
    assert policy.on_expiry is OnExpiry.AWAIT_REOPEN
    task = make_task(policy=policy)
    task = with_status(task, tf.tick(task, T0))
    late = T0 + timedelta(seconds=60)
    with pytest.raises(tf.NotExpired):
        tf.reopen(task, READ, late - timedelta(seconds=1), by="lead", deadline_seconds=600)
    task = with_status(task, tf.tick(task, late))
    status = task.current_status()
    assert status.phase is TaskPhase.PENDING_APPROVAL and status.completed_at is None
    assert status.step(READ).state is StepState.EXPIRED and status.next_deadline is None
    with pytest.raises(tf.HumanTaskExpired):
        approve(task, READ)
    assert tf.tick(task, late + timedelta(days=1)) == status  # blocked, nothing moves
    with pytest.raises(tf.StepNotDecidable):
        tf.reopen(task, WRITE, late, by="lead", deadline_seconds=600)

    at = late + timedelta(hours=1)
    reopened = tf.reopen(task, READ, at, by="lead", deadline_seconds=600, reason="back")
    entry = reopened.step(READ)
    assert entry.reopened is not None and (entry.reopened.by, entry.reopened.count) == ("lead", 1)
    assert tf.owned_status(reopened, tf.Writer.PLATFORM_API)["steps"][0]["reopened"]["by"] == "lead"
    task = with_status(task, reopened)
    # decidable at once, before the operator gives the step its new deadline
    assert tf.is_expired(task.current_status().step(READ), policy, at) is False
    ticked = tf.tick(task, at)
    assert ticked.step(READ).deadline == at + timedelta(seconds=600)
    assert ticked.step(READ).state is StepState.PENDING
    assert ticked.next_deadline == at + timedelta(seconds=600)
    task = with_status(task, ticked)
    approve(task, READ)  # in time
    # missed again: expired again, and reopened again
    again = at + timedelta(seconds=600)
    task = with_status(task, tf.tick(task, again))
    assert task.current_status().step(READ).state is StepState.EXPIRED
    second = tf.reopen(task, READ, again, by="lead2", deadline_seconds=60)
    assert second.step(READ).reopened.count == 2  # type: ignore[union-attr]


def test_under_on_expiry_end_nothing_reopens_an_expired_task() -> None:
    policy = TaskPolicy(
        decision_deadline_seconds=60,
        escalation=EscalationPolicy(max_escalations=0),
        on_expiry=OnExpiry.END,
    )
    task = make_task(policy=policy)
    task = with_status(task, tf.tick(task, T0))
    late = T0 + timedelta(seconds=60)
    task = with_status(task, tf.tick(task, late))
    assert task.current_status().phase is TaskPhase.EXPIRED
    with pytest.raises(tf.TaskTerminal):
        tf.reopen(task, READ, late, by="lead", deadline_seconds=600)


# --- execution -----------------------------------------------------------------------------


def test_a_step_executes_only_when_approved() -> None:
    task = make_task()
    with pytest.raises(tf.NotApproved):
        tf.start_execution(task, READ, T0)
    status = tf.start_execution(approve(task, READ), READ, T0)
    execution = status.step(READ).execution
    assert execution is not None and execution.state is ExecutionState.RUNNING
    assert execution.attempt == 1 and execution.started_at == T0


def test_a_step_executes_only_after_every_earlier_step_executed() -> None:
    task = approve(make_task(), READ)
    write = task.step(WRITE)
    assert write is not None
    forged = task.current_status().with_step(
        task.current_status()
        .step(WRITE)
        .model_copy(
            update={
                "decision": Decision(
                    verdict=Verdict.APPROVE,
                    by="mallory",
                    at=T0,
                    idempotency_key="x",
                    step_hash=tf.step_hash(write),
                )
            }
        )
    )
    with pytest.raises(tf.StepNotExecutable) as caught:
        tf.start_execution(with_status(task, forged), WRITE, T0)
    assert caught.value.code == "step_not_executable"


def test_a_restart_counts_attempts_and_finishing_twice_is_refused() -> None:
    task = approve(make_task(), READ)
    task = with_status(task, tf.start_execution(task, READ, T0))
    task = with_status(task, tf.start_execution(task, READ, T0 + timedelta(seconds=5)))
    execution = task.current_status().step(READ).execution
    assert execution is not None and execution.attempt == 2
    with pytest.raises(tf.ExecutionConflict):
        tf.finish_execution(make_task(), READ, T0)
    done = with_status(task, tf.finish_execution(task, READ, T0, result={"orders": 3}))
    assert tf.step_state(done, READ, T0) is StepState.EXECUTED
    with pytest.raises(tf.ExecutionConflict):
        tf.finish_execution(done, READ, T0)
    with pytest.raises(tf.ExecutionConflict):
        tf.start_execution(done, READ, T0)


def test_all_steps_executed_completes_the_task() -> None:
    task = run(approve(make_task(), READ), READ)
    assert tf.derive_phase(task, T0) is TaskPhase.PENDING_APPROVAL
    assert tf.current_step(task) == WRITE
    task = run(approve(task, WRITE), WRITE)
    assert tf.derive_phase(task, T0) is TaskPhase.COMPLETED
    assert tf.current_step(task) is None
    status = tf.tick(task, T0)
    assert status.phase is TaskPhase.COMPLETED and status.completed_at == T0
    assert status.highest_pending_risk is None and status.next_deadline is None


def test_a_failed_step_fails_the_task() -> None:
    task = run(approve(make_task(), READ), READ, error="amazon said 503")
    assert tf.derive_phase(task, T0) is TaskPhase.FAILED
    assert tf.step_state(task, READ, T0) is StepState.FAILED
    assert tf.decidable_step(task) is None


# --- cancellation and terminal phases ------------------------------------------------------


def test_cancel_is_final() -> None:
    task = approve(make_task(), READ)
    task = with_status(task, tf.cancel(task, T0))
    assert task.current_status().phase is TaskPhase.CANCELLED
    with pytest.raises(tf.TaskTerminal):
        tf.cancel(task, T0)
    with pytest.raises(tf.TaskTerminal):
        tf.start_execution(task, READ, T0)
    assert tf.tick(task, T0 + timedelta(hours=1)) == task.current_status()


# --- ownership of the status ---------------------------------------------------------------


def test_each_writer_owns_a_disjoint_part_of_the_status() -> None:
    task = make_task(policy=POLICY)
    task = with_status(task, tf.tick(task, T0))
    task = with_status(task, tf.start_execution(approve(task, READ), READ, T0))
    status = task.current_status()
    platform = tf.owned_status(status, tf.Writer.PLATFORM_API)
    agent = tf.owned_status(status, tf.Writer.AGENT)
    operator = tf.owned_status(status, tf.Writer.OPERATOR)
    assert set(platform) == {"steps"} and set(agent) == {"steps"}
    assert {k for e in platform["steps"] for k in e} == {"id", "approvals", "decision"}
    assert {k for e in agent["steps"] for k in e} == {"id", "execution"}
    assert set(operator) - {"steps"} <= set(tf.OPERATOR_STATUS_FIELDS)
    assert {k for e in operator["steps"] for k in e} == {"id", "state", "deadline", "escalations"}


def test_an_unknown_outcome_waits_for_an_expert_and_is_never_retried_on_its_own() -> None:
    task = make_task(policy=POLICY)
    task = with_status(task, tf.tick(task, T0))
    task = run(approve(task, READ), READ)
    task = approve(task, WRITE)
    task = with_status(task, tf.start_execution(task, WRITE, T0))
    task = with_status(task, tf.finish_execution(task, WRITE, T0, error="timed out", unknown=True))
    entry = task.current_status().step(WRITE)
    assert entry.execution is not None
    assert entry.execution.state is ExecutionState.OUTCOME_UNKNOWN
    assert tf.executable_step(task) is None  # the agent does not call again
    assert tf.derive_phase(task, T0) is TaskPhase.PENDING_APPROVAL  # not Failed
    assert tf.step_state(task, WRITE, T0) is StepState.OUTCOME_UNKNOWN
    assert tf.awaiting_resolution(task) is not None
    with pytest.raises(tf.ExecutionConflict):
        tf.start_execution(task, WRITE, T0)
    # the platform's proxy still reaches its ledger (which answers outcome unknown)
    tf.authorize_tool_call(
        task, WRITE, tool="shopify_query", parameters=dict(task.spec.steps[1].parameters), now=T0
    )

    resolved = with_status(
        task, tf.resolve(task, WRITE, Outcome.NOT_APPLIED, by="bob", note="none", now=T0)
    )
    assert tf.resolve(resolved, WRITE, Outcome.NOT_APPLIED, by="bob", note=None, now=T0) == (
        resolved.current_status()
    )
    with pytest.raises(tf.NotUnknown):
        tf.resolve(resolved, WRITE, Outcome.APPLIED, by="bob", note=None, now=T0)
    assert tf.awaiting_resolution(resolved) is None
    assert tf.derive_phase(resolved, T0) is TaskPhase.IN_PROGRESS
    step = tf.executable_step(resolved)
    assert step is not None and step.id == WRITE  # one more attempt, once
    again = with_status(resolved, tf.start_execution(resolved, WRITE, T0))
    run_again = again.current_status().step(WRITE).execution
    assert run_again is not None and run_again.attempt == 2
    assert run_again.state is ExecutionState.RUNNING
    platform = tf.owned_status(resolved.current_status(), tf.Writer.PLATFORM_API)
    assert any("resolution" in e for e in platform["steps"])
    agent = tf.owned_status(resolved.current_status(), tf.Writer.AGENT)
    assert not any("resolution" in e for e in agent["steps"])


def test_error_codes_are_stable_and_distinct() -> None:
    codes = {cls.code for cls in tf.TaskFlowError.__subclasses__()}
    assert {
        "task_terminal",
        "step_not_found",
        "step_not_decidable",
        "step_already_decided",
        "human_task_expired",
        "step_hash_mismatch",
        "invalid_decision",
        "duplicate_approver",
        "approval_conflict",
        "idempotency_conflict",
        "not_approved",
        "step_not_executable",
        "execution_conflict",
        "tool_call_mismatch",
        "edit_changes_action",
        "outcome_not_unknown",
        "step_not_failed",  # issue 15, item 9
        "step_not_retryable",
        "decision_not_expired",
        "not_confirmed",  # the client's confirmation
        "confirmation_not_required",
        "confirmation_stale",
        "step_declined",
        "confirmation_closed",
    } == codes
    assert len(codes) == len(tf.TaskFlowError.__subclasses__())
    error = tf.HumanTaskExpired("too late", step_id="s1")
    assert error.to_dict() == {
        "code": "human_task_expired",
        "message": "too late",
        "details": {"stepId": "s1"},
    }


# --- property-based tests ------------------------------------------------------------------

APPROVERS = ("alice", "bob", "carol")
CATALOG_CALLS: tuple[dict[str, Any], ...] = (
    {"action": "getOrder", "params": {"id": 1}},
    {"action": "setInventoryLevel", "params": {"available": 1}},
)
ORG_POLICIES = (
    STRICT,
    OrgPolicy(auto_approve_low=True),
    OrgPolicy(auto_approve_low=True, required_approvals=RequiredApprovals(low=2, high=2)),
)


@st.composite
def plans(draw: st.DrawFn) -> AgenticTask:
    """A random plan (1-5 steps of both kinds and every risk) under a random policy."""
    steps = []
    for index in range(draw(st.integers(1, 5))):
        risk = draw(st.sampled_from(Risk))
        step_id = f"s{index}"
        if draw(st.booleans()):
            parameters = draw(
                st.dictionaries(
                    st.text("abc", min_size=1, max_size=3),
                    st.integers(-5, 5) | st.text(max_size=3),
                    max_size=3,
                )
                | st.sampled_from(CATALOG_CALLS)  # reads and writes of the action catalog
            )
            steps.append(action(step_id, risk, parameters=parameters))
        else:
            options = draw(
                st.none()
                | st.lists(
                    st.text("xyz", min_size=1, max_size=3), min_size=2, max_size=3, unique=True
                )
            )
            steps.append(
                input_step(step_id, options=tuple(options) if options else None, risk=risk)
            )
    policy = TaskPolicy(
        auto_approve=tuple(draw(st.lists(st.sampled_from([Risk.LOW]), unique=True))),
        decision_deadline_seconds=draw(st.integers(60, 600)),
        escalation=EscalationPolicy(
            interval_seconds=draw(st.integers(60, 600)), max_escalations=draw(st.integers(0, 2))
        ),
        required_approvals=RequiredApprovals(
            low=draw(st.integers(1, 2)),
            medium=draw(st.integers(1, 2)),
            high=draw(st.integers(1, 3)),
            critical=draw(st.integers(1, 3)),
        ),
    )
    return make_task(*steps, policy=policy)


def honest_request(step: Step, by: str, key: str, reject: bool = False) -> tf.DecisionRequest:
    """A request that fits the step (or a rejection)."""
    fields: dict[str, Any] = {}
    if reject:
        verdict = Verdict.REJECT
    elif step.kind is StepKind.ACTION:
        verdict = Verdict.APPROVE
    elif step.options is not None:
        verdict, fields = Verdict.SELECT, {"selection": step.options[0]}
    else:
        verdict, fields = Verdict.PROVIDE, {"input": {"value": 1}}
    return tf.DecisionRequest(
        verdict=verdict, by=by, step_hash=tf.step_hash(step), idempotency_key=key, **fields
    )


class TaskMachine(RuleBasedStateMachine):
    """Random writers acting on a random plan; invariants checked after every event."""

    def __init__(self) -> None:
        super().__init__()
        self.task = make_task()
        self.now = T0
        self.keys = 0
        self.forged: set[str] = set()
        self.org = STRICT

    @initialize(task=plans(), org=st.sampled_from(ORG_POLICIES))
    def start(self, task: AgenticTask, org: OrgPolicy) -> None:
        self.task = with_status(task, tf.tick(task, self.now))
        self.org = org

    def _target(self, index: int | None, pick: Step | None) -> Step:
        if index is None and pick is not None:
            return pick
        steps = self.task.spec.steps
        return steps[(index or 0) % len(steps)]

    def _apply(self, move: Any) -> None:
        before = self.task
        before_phase = tf.derive_phase(before, self.now)
        try:
            status = move()
        except tf.TaskFlowError:
            return
        if status is None:
            return
        after = with_status(before, status)
        self._check_transition(before, after, before_phase)
        self.task = after

    def _check_transition(
        self, before: AgenticTask, after: AgenticTask, before_phase: TaskPhase
    ) -> None:
        # Terminal phases never change, and neither does what the operator recorded then.
        if before_phase.terminal:
            assert tf.derive_phase(after, self.now) is before_phase
        recorded = before.current_status()
        if recorded.phase is not None and recorded.phase.terminal:
            assert after.current_status().phase is recorded.phase
            assert after.current_status().completed_at == recorded.completed_at
        for step in before.spec.steps:
            old = before.current_status().step(step.id)
            new = after.current_status().step(step.id)
            # A decision, once made, is the only effective one: never changed or removed.
            if old.decision is not None:
                assert new.decision == old.decision
            # Approvals are only ever appended.
            assert new.approvals[: len(old.approvals)] == old.approvals

    @rule(
        index=st.none() | st.integers(0, 9),
        by=st.sampled_from(APPROVERS),
        mode=st.sampled_from(["ok", "ok", "ok", "ok", "reject", "bad_hash", "bad_verdict"]),
        retry=st.booleans(),
    )
    def decide(self, index: int | None, by: str, mode: str, retry: bool) -> None:
        step = self._target(index, tf.decidable_step(self.task))
        if not retry:
            self.keys += 1
        key = f"key-{self.keys}-{by}"
        request = honest_request(step, by, key, reject=mode == "reject")
        if mode == "bad_hash":
            request = tf.DecisionRequest(
                verdict=request.verdict, by=by, step_hash="0" * 64, idempotency_key=key
            )
        if mode == "bad_verdict":
            request = tf.DecisionRequest(
                verdict=Verdict.SELECT if step.kind is StepKind.ACTION else Verdict.APPROVE,
                by=by,
                step_hash=tf.step_hash(step),
                idempotency_key=key,
                selection="nope",
            )
        self._apply(lambda: tf.decide(self.task, step.id, request, self.now, org=self.org))

    @rule()
    def progress(self) -> None:
        """The honest next move of whichever writer is awaited (drives runs to the end)."""
        status = self.task.current_status()
        executable = tf.executable_step(self.task)
        if executable is not None:
            execution = status.step(executable.id).execution
            if execution is None:
                self._apply(lambda: tf.start_execution(self.task, executable.id, self.now))
            else:
                self._apply(lambda: tf.finish_execution(self.task, executable.id, self.now))
            return
        decidable = tf.decidable_step(self.task)
        if decidable is not None:
            used = {a.by for a in status.step(decidable.id).approvals}
            by = next(a for a in APPROVERS if a not in used)
            self.keys += 1
            request = honest_request(decidable, by, f"key-{self.keys}")
            self._apply(lambda: tf.decide(self.task, decidable.id, request, self.now, org=self.org))

    @rule(index=st.integers(0, 9))
    def forge_decision(self, index: int) -> None:
        """A decision written by hand (e.g. by a cluster admin), bypassing decide(): the
        agent's moves must still never run a step out of order."""
        step = self._target(index, None)
        status = self.task.current_status()
        entry = status.step(step.id)
        if (
            entry.decision is not None
            or entry.approvals
            or tf.derive_phase(self.task, self.now).terminal
        ):
            return
        approvals = tuple(
            honest_request(step, by, f"forged-{by}").to_decision(self.now)
            for by in APPROVERS[: tf.required_approvals(self.task, step, self.org)]
        )
        self.forged.add(step.id)
        forged = entry.model_copy(update={"approvals": approvals, "decision": approvals[-1]})
        self.task = with_status(self.task, status.with_step(forged))

    @rule()
    def auto(self) -> None:
        self._apply(lambda: tf.auto_approve(self.task, self.now, org=self.org))

    @rule(index=st.none() | st.integers(0, 9))
    def start_execution(self, index: int | None) -> None:
        step = self._target(index, tf.executable_step(self.task))
        self._apply(lambda: tf.start_execution(self.task, step.id, self.now))

    @rule(index=st.none() | st.integers(0, 9), fail=st.sampled_from([False, False, False, True]))
    def finish_execution(self, index: int | None, fail: bool) -> None:
        step = self._target(index, tf.executable_step(self.task))
        error = "boom" if fail else None
        self._apply(
            lambda: tf.finish_execution(self.task, step.id, self.now, result={"n": 1}, error=error)
        )

    @rule(seconds=st.sampled_from([0, 5, 60, 300, 900]))
    def tick(self, seconds: int) -> None:
        before_phase = tf.derive_phase(self.task, self.now)
        self.now += timedelta(seconds=seconds)
        if before_phase.terminal:
            assert tf.derive_phase(self.task, self.now) is before_phase
        self._apply(lambda: tf.tick(self.task, self.now))

    @rule(roll=st.integers(0, 9))
    def cancel(self, roll: int) -> None:
        if roll == 0:  # rarely, so that most runs get far into their plans
            self._apply(lambda: tf.cancel(self.task, self.now))

    @invariant()
    def no_step_executes_unapproved(self) -> None:
        policy = self.task.spec.policy
        for step in self.task.spec.steps:
            entry = self.task.current_status().step(step.id)
            if entry.execution is None:
                continue
            assert entry.decision is not None and entry.decision.verdict.positive
            assert entry.decision.step_hash == tf.step_hash(step)
            if entry.decision.by != tf.AUTO_APPROVER:
                assert len(entry.approvals) >= tf.required_approvals(self.task, step, self.org)
            else:  # only reads of the catalog, effective risk low, where both opted in
                assert self.org.auto_approve_low and Risk.LOW in policy.auto_approve
                assert effective_risk(step) is Risk.LOW

    @invariant()
    def steps_execute_in_order(self) -> None:
        status = self.task.current_status()
        seen_unfinished = False
        for step in self.task.spec.steps:
            entry = status.step(step.id)
            if entry.execution is not None:
                assert not seen_unfinished, f"{step.id} executed before an earlier step"
            if not tf.is_executed(entry):
                seen_unfinished = True
        running = [
            e for e in status.steps if e.execution and e.execution.state is ExecutionState.RUNNING
        ]
        assert len(running) <= 1

    @invariant()
    def decisions_follow_the_plan_order(self) -> None:
        status = self.task.current_status()
        earlier_done = True
        for step in self.task.spec.steps:
            entry = status.step(step.id)
            if (entry.approvals or entry.decision is not None) and step.id not in self.forged:
                assert earlier_done, f"{step.id} was decided before an earlier step executed"
            earlier_done = earlier_done and tf.is_executed(entry)

    @invariant()
    def a_rejection_halts(self) -> None:
        status = self.task.current_status()
        halted = False
        for step in self.task.spec.steps:
            entry = status.step(step.id)
            if halted:
                assert entry.execution is None
                if step.id not in self.forged:
                    assert entry.decision is None and not entry.approvals
            if tf.is_rejected(entry):
                halted = True
                assert entry.execution is None
        if halted and status.phase is not TaskPhase.CANCELLED:
            assert tf.derive_phase(self.task, self.now) is TaskPhase.REJECTED

    @invariant()
    def at_most_one_effective_decision_per_step(self) -> None:
        for step in self.task.spec.steps:
            entry = self.task.current_status().step(step.id)
            approvers = [a.by for a in entry.approvals]
            assert len(approvers) == len(set(approvers))
            if entry.decision is not None and entry.decision.verdict.positive:
                assert entry.decision in entry.approvals
        ids = [e.id for e in self.task.current_status().steps]
        assert len(ids) == len(set(ids))


TaskMachine.TestCase.settings = settings(
    max_examples=120,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestTaskMachine = TaskMachine.TestCase


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(task=plans(), approvers=st.permutations(APPROVERS))
def test_a_plan_approved_and_executed_step_by_step_completes(
    task: AgenticTask, approvers: list[str]
) -> None:
    now = T0
    task = with_status(task, tf.tick(task, now))
    for step in task.spec.steps:
        assert tf.current_step(task) == step.id
        needed = tf.required_approvals(task, step, STRICT)
        for by in approvers[:needed]:
            decidable = tf.decidable_step(task)
            assert decidable is not None and decidable.id == step.id
            task = with_status(
                task,
                tf.decide(
                    task, step.id, honest_request(step, by, f"{step.id}-{by}"), now, org=STRICT
                ),
            )
            assert tf.derive_phase(task, now) is not TaskPhase.COMPLETED
        executable = tf.executable_step(task)
        assert executable is not None and executable.id == step.id
        task = run(task, step.id)
        task = with_status(task, tf.tick(task, now))
    assert task.current_status().phase is TaskPhase.COMPLETED
    assert all(s.state is StepState.EXECUTED for s in task.current_status().steps)


@settings(max_examples=80, deadline=None)
@given(task=plans(), rejected_at=st.integers(0, 4), by=st.sampled_from(APPROVERS))
def test_a_rejection_anywhere_leaves_later_steps_untouched(
    task: AgenticTask, rejected_at: int, by: str
) -> None:
    target = task.spec.steps[rejected_at % len(task.spec.steps)]
    for step in task.spec.steps:
        if step.id == target.id:
            break
        for approver in APPROVERS[: tf.required_approvals(task, step, STRICT)]:
            task = with_status(
                task,
                tf.decide(task, step.id, honest_request(step, approver, approver), T0, org=STRICT),
            )
        task = run(task, step.id)
    task = with_status(
        task,
        tf.decide(task, target.id, honest_request(target, by, "no", reject=True), T0, org=STRICT),
    )
    status = tf.tick(task, T0)
    assert status.phase is TaskPhase.REJECTED
    later = task.spec.step_ids[task.spec.step_ids.index(target.id) + 1 :]
    assert all(status.step(i).decision is None and status.step(i).execution is None for i in later)
    for step_id in later:
        later_step = task.step(step_id)
        assert later_step is not None
        with pytest.raises(tf.TaskTerminal):
            tf.decide(task, step_id, honest_request(later_step, by, "later"), T0, org=STRICT)


def test_status_of_an_unknown_step_is_empty() -> None:
    status = AgenticTaskStatus()
    assert status.step("x").decision is None and status.step("x").escalations == 0
