"""The platform API's moves: an expert's decision (:func:`decide`), the policy's
auto-approval, and the check that a tool call is exactly what was approved."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from pydantic import JsonValue

from ..policy import OrgPolicy, auto_approves
from ..resources import (
    AgenticTask,
    AgenticTaskStatus,
    Decision,
    ExecutionState,
    Step,
    StepKind,
    StepStatus,
    TaskPhase,
    Verdict,
)
from .errors import (
    ApprovalConflict,
    DuplicateApprover,
    EditChangesAction,
    ExecutionConflict,
    HumanTaskExpired,
    IdempotencyConflict,
    InvalidDecision,
    StepAlreadyDecided,
    StepHashMismatch,
    StepNotDecidable,
    TaskTerminal,
    ToolCallMismatch,
)
from .execution import approved_step
from .state import (
    _find_step,
    canonical_json,
    decidable_step,
    derive_phase,
    effective_parameters,
    is_expired,
    required_approvals,
    step_hash,
)

AUTO_APPROVER = "policy:auto-approve"
"""The `by` of decisions made by the task's auto-approval policy (reserved for it)."""


@dataclass(frozen=True)
class DecisionRequest:
    """What an expert submits for a step."""

    verdict: Verdict
    by: str
    step_hash: str
    idempotency_key: str
    feedback: str | None = None
    parameters: Mapping[str, JsonValue] | None = None
    input: Mapping[str, JsonValue] | None = None
    selection: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "verdict", Verdict(self.verdict))

    def to_decision(self, at: datetime) -> Decision:
        """The decision record this request makes at time `at`."""
        return Decision(
            verdict=self.verdict,
            by=self.by,
            at=at,
            feedback=self.feedback,
            parameters=dict(self.parameters) if self.parameters is not None else None,
            input=dict(self.input) if self.input is not None else None,
            selection=self.selection,
            idempotency_key=self.idempotency_key,
            step_hash=self.step_hash,
        )


def _payload(decision: Decision | DecisionRequest) -> tuple[object, ...]:
    """What an approval amends; all approvals of a step must agree on it."""
    return (
        decision.verdict,
        canonical_json(decision.parameters) if decision.parameters is not None else None,
        canonical_json(decision.input) if decision.input is not None else None,
        decision.selection,
    )


def _replay(entry: StepStatus, request: DecisionRequest) -> bool:
    """True when the request repeats one already recorded (a retry); raises when its
    idempotency key was used for something else."""
    recorded = list(entry.approvals)
    if entry.decision is not None:
        recorded.append(entry.decision)
    for earlier in recorded:
        if earlier.idempotency_key != request.idempotency_key:
            continue
        if (
            earlier.by == request.by
            and earlier.step_hash == request.step_hash
            and _payload(earlier) == _payload(request)
        ):
            return True
        raise IdempotencyConflict(
            "this idempotency key was already used for a different decision",
            step_id=entry.id,
        )
    return False


def _check_verdict(step: Step, request: DecisionRequest) -> None:
    verdict = request.verdict
    allowed = {
        StepKind.ACTION: {Verdict.APPROVE, Verdict.EDIT, Verdict.REJECT},
        StepKind.INPUT: {Verdict.PROVIDE, Verdict.SELECT, Verdict.REJECT},
    }[step.kind]
    if verdict not in allowed:
        names = ", ".join(sorted(v.value for v in allowed))
        raise InvalidDecision(
            f"a {step.kind.value} step takes one of: {names}; not {verdict.value}", step_id=step.id
        )
    if verdict is Verdict.EDIT and request.parameters is None:
        raise InvalidDecision("an edit carries the amended parameters", step_id=step.id)
    edited = request.parameters
    if (
        verdict is Verdict.EDIT
        and edited is not None
        and (edited.get("action") != step.parameters.get("action"))
    ):
        raise EditChangesAction(
            "an edit keeps the step's action; a different action needs a new plan",
            step_id=step.id,
        )
    if verdict is Verdict.PROVIDE:
        if step.options is not None:
            raise InvalidDecision(
                "this input step offers options: select one of them", step_id=step.id
            )
        if request.input is None:
            raise InvalidDecision("a provide decision carries the input", step_id=step.id)
    if verdict is Verdict.SELECT:
        if step.options is None:
            raise InvalidDecision("this input step offers no options to select", step_id=step.id)
        if request.selection not in step.options:
            raise InvalidDecision(
                f"{request.selection!r} is not one of the step's options", step_id=step.id
            )


def _check_decidable(
    task: AgenticTask, step: Step, entry: StepStatus, request: DecisionRequest, now: datetime
) -> None:
    """Refuse a decision on a task that is over, a step already decided, not the first
    undecided one, past its deadline, or changed since the expert saw it."""
    step_id = step.id
    phase = derive_phase(task, now)
    if phase is TaskPhase.EXPIRED:
        raise HumanTaskExpired("the task expired waiting for a decision", step_id=step_id)
    if phase.terminal:
        raise TaskTerminal(f"the task is {phase.value}", step_id=step_id)
    if entry.decision is not None:
        raise StepAlreadyDecided("the step already has its decision", step_id=step_id)
    decidable = decidable_step(task)
    if decidable is None or decidable.id != step_id:
        raise StepNotDecidable(
            "only the first undecided step can be decided, after every earlier step executed",
            step_id=step_id,
        )
    if is_expired(entry, task.spec.policy, now):
        raise HumanTaskExpired("the decision deadline passed", step_id=step_id)
    if request.step_hash != step_hash(step):
        raise StepHashMismatch(
            "the decision was made on a different version of the step", step_id=step_id
        )


def decide(
    task: AgenticTask,
    step_id: str,
    request: DecisionRequest,
    now: datetime,
    *,
    org: OrgPolicy,
) -> AgenticTaskStatus:
    """Record an expert's decision on a step; returns the new status.

    Only `approvals` and `decision` of that step change. A retry with the same
    idempotency key returns the status unchanged. A rejection is the decision at once; a
    positive verdict is recorded as an approval, and becomes the decision when the
    step has the distinct approvers :func:`required_approvals` asks for (the org's
    policy and the task's, for the step's effective risk).
    """
    step = _find_step(task, step_id)
    status = task.current_status()
    entry = status.step(step_id)
    if _replay(entry, request):
        return status
    if request.by == AUTO_APPROVER:
        raise InvalidDecision(f"{AUTO_APPROVER} is reserved for the policy", step_id=step_id)

    _check_decidable(task, step, entry, request, now)
    _check_verdict(step, request)

    decision = request.to_decision(now)
    if not request.verdict.positive:
        return status.with_step(entry.model_copy(update={"decision": decision}))

    if any(a.by == request.by for a in entry.approvals):
        raise DuplicateApprover(
            f"{request.by} already approved this step; another expert must approve",
            step_id=step_id,
        )
    if entry.approvals and _payload(entry.approvals[0]) != _payload(request):
        raise ApprovalConflict(
            "the approvals of a step must agree on the verdict and on what it amends",
            step_id=step_id,
        )
    approvals = (*entry.approvals, decision)
    update: dict[str, object] = {"approvals": approvals}
    if len(approvals) >= required_approvals(task, step, org):
        update["decision"] = decision
    return status.with_step(entry.model_copy(update=update))


def auto_approve(task: AgenticTask, now: datetime, *, org: OrgPolicy) -> AgenticTaskStatus | None:
    """The status with the decidable step approved by policy, or None when the policies do
    not cover it (:func:`humanwork_core.policy.auto_approves`: a read-only action of the
    catalog, effective risk low, the org opted in and the task asks for it)."""
    step = decidable_step(task)
    if step is None or not auto_approves(org, task.spec.policy, step):
        return None
    status = task.current_status()
    entry = status.step(step.id)
    if entry.approvals or is_expired(entry, task.spec.policy, now):
        return None
    digest = step_hash(step)
    decision = Decision(
        verdict=Verdict.APPROVE,
        by=AUTO_APPROVER,
        at=now,
        idempotency_key=f"auto-approve:{digest[:32]}",
        step_hash=digest,
    )
    return status.with_step(
        entry.model_copy(update={"approvals": (decision,), "decision": decision})
    )


def authorize_tool_call(
    task: AgenticTask,
    step_id: str,
    *,
    tool: str,
    parameters: Mapping[str, JsonValue],
    now: datetime,
) -> dict[str, JsonValue]:
    """Check that a tool call is exactly what was approved, before the platform runs it.

    Returns the parameters to run the tool with. Refuses when the task is terminal, the
    step is not approved, was approved on another version of itself, an earlier step has
    not executed, the step already finished, or the call differs from the approved one.
    """
    step, entry = approved_step(task, step_id, now)
    if entry.execution is not None and entry.execution.state not in (
        ExecutionState.RUNNING,
        ExecutionState.OUTCOME_UNKNOWN,  # the proxy's ledger answers (unknown, or resolved)
    ):
        raise ExecutionConflict("the step already finished", step_id=step_id)
    if step.kind is not StepKind.ACTION or step.tool != tool:
        raise ToolCallMismatch(f"the approved step does not call {tool!r}", step_id=step_id)
    approved = effective_parameters(step, entry)
    if canonical_json(dict(parameters)) != canonical_json(approved):
        raise ToolCallMismatch("the parameters differ from the approved ones", step_id=step_id)
    return approved
