"""The AgenticTask custom resource: one plan of steps, each waiting for a human's decision.

The spec (the plan) is written once by its creator and is immutable. Three writers share the
status, each owning its own fields (enforced by the admission policies in
manifests/base/policies/): the platform API writes each step's `approvals` and `decision`,
the agent writes each step's `execution`, the platform API also writes an expert's
`resolution` of an execution whose outcome is unknown, the operator writes everything else (phase,
current step, step states, deadlines, escalations, conditions). The rules every writer
follows live in :mod:`humanwork_core.taskflow`.
"""

from __future__ import annotations

from collections import Counter
from enum import StrEnum
from typing import Annotated, ClassVar, Self

from pydantic import AwareDatetime, ConfigDict, Field, JsonValue, model_validator

from .. import catalog
from ..risk import Risk
from .common import (
    DNS_LABEL_PATTERN,
    NAME_PATTERN,
    SHA256_PATTERN,
    UUID_PATTERN,
    Condition,
    CrdInfo,
    KubeResource,
    PrinterColumn,
    ResourceModel,
    cel,
    conditions_field,
    k8s,
)

MAX_STEPS = 50
MAX_OPTIONS = 20
MAX_APPROVALS = 5
DAY_SECONDS = 86_400

FreeForm = dict[str, JsonValue]
"""A JSON object of any shape (tool parameters, provided input, execution results)."""


class StepKind(StrEnum):
    """An action calls a tool; an input step asks the expert for content or a choice."""

    ACTION = "action"
    INPUT = "input"


class TaskPhase(StrEnum):
    """Where the task stands; the last five are terminal and never change again."""

    PENDING_APPROVAL = "PendingApproval"
    IN_PROGRESS = "InProgress"
    COMPLETED = "Completed"
    REJECTED = "Rejected"
    FAILED = "Failed"
    CANCELLED = "Cancelled"
    EXPIRED = "Expired"

    @property
    def terminal(self) -> bool:
        """Whether the phase is final."""
        return self not in (TaskPhase.PENDING_APPROVAL, TaskPhase.IN_PROGRESS)


class StepState(StrEnum):
    """Lifecycle of one step (derived by the operator from decision, execution and time)."""

    PENDING = "Pending"
    ESCALATED = "Escalated"
    APPROVED = "Approved"
    EXECUTING = "Executing"
    EXECUTED = "Executed"
    FAILED = "Failed"
    REJECTED = "Rejected"
    EXPIRED = "Expired"
    OUTCOME_UNKNOWN = "OutcomeUnknown"


class Verdict(StrEnum):
    """What the expert decided: approve or edit an action, provide or select an input, or
    reject either (which halts the task)."""

    APPROVE = "approve"
    EDIT = "edit"
    PROVIDE = "provide"
    SELECT = "select"
    REJECT = "reject"

    @property
    def positive(self) -> bool:
        """Every verdict but reject lets the step go ahead."""
        return self is not Verdict.REJECT


class ExecutionState(StrEnum):
    """State of the agent's run of a step."""

    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    OUTCOME_UNKNOWN = "OutcomeUnknown"
    """The tool call may or may not have taken effect upstream: the step waits for an
    expert's resolution, never for an automatic retry."""


class Outcome(StrEnum):
    """An expert's finding on a step whose outcome was unknown."""

    APPLIED = "applied"
    NOT_APPLIED = "not_applied"


StepId = Annotated[str, Field(min_length=1, max_length=63, pattern=NAME_PATTERN)]
Option = Annotated[str, Field(min_length=1, max_length=256)]


# --- spec ----------------------------------------------------------------------------------


class AgentRef(ResourceModel):
    """The AgentInstance, in the same namespace, that proposed and executes the plan."""

    name: str = Field(
        description="Name of the AgentInstance; its identity is the ServiceAccount "
        "<name>-agent in this namespace.",
        min_length=1,
        max_length=57,
        pattern=DNS_LABEL_PATTERN,
    )


class EscalationPolicy(ResourceModel):
    """What happens when a decision is not made in time."""

    interval_seconds: int = Field(
        default=3600,
        ge=1,
        le=7 * DAY_SECONDS,
        description="New deadline granted at each escalation, in seconds.",
    )
    max_escalations: int = Field(
        default=2,
        ge=0,
        le=10,
        description="How many times a missed deadline escalates before the step expires.",
    )


class RequiredApprovals(ResourceModel):
    """Number of distinct experts who must approve a step, per risk level."""

    low: int = Field(default=1, ge=1, le=MAX_APPROVALS, description="Approvals for low risk.")
    medium: int = Field(default=1, ge=1, le=MAX_APPROVALS, description="Approvals for medium risk.")
    high: int = Field(default=1, ge=1, le=MAX_APPROVALS, description="Approvals for high risk.")
    critical: int = Field(
        default=2, ge=1, le=MAX_APPROVALS, description="Approvals for critical risk."
    )

    def for_risk(self, risk: Risk) -> int:
        """The number of approvals a step of this risk needs."""
        value: int = getattr(self, risk.value)
        return value


class TaskPolicy(ResourceModel):
    """Approval policy of the task: auto-approval, deadlines, escalation, quorum."""

    auto_approve: tuple[Risk, ...] = Field(
        default=(),
        description="Risk levels whose action steps may be approved without a human: only "
        "low, and only for read-only actions of the action catalog in an org whose policy "
        "opted in (GET /orgs/{orgId}/policy); the task can make the org's bar stricter, never "
        "looser. Default none.",
        max_length=4,
        json_schema_extra=k8s(
            list_type="set",
            rules=[
                cel(
                    "self.all(r, r == 'low')",
                    "only low risk steps may be auto-approved; medium, high and critical "
                    "steps always need a human decision",
                )
            ],
        ),
    )
    decision_deadline_seconds: int = Field(
        default=3600,
        ge=1,
        le=30 * DAY_SECONDS,
        description="Time an expert has to decide a step once it becomes decidable, in seconds.",
    )
    escalation: EscalationPolicy = Field(
        default_factory=EscalationPolicy,
        description="Escalation of missed decision deadlines.",
        json_schema_extra=k8s(default={}),
    )
    required_approvals: RequiredApprovals = Field(
        default_factory=RequiredApprovals,
        description="Distinct experts who must approve a step, per risk (default 2 for "
        "critical, 1 otherwise).",
        json_schema_extra=k8s(default={}),
    )

    @model_validator(mode="after")
    def _auto_approve(self) -> Self:
        if any(r is not Risk.LOW for r in self.auto_approve):
            raise ValueError("only low risk steps may be auto-approved")
        if len(set(self.auto_approve)) != len(self.auto_approve):
            raise ValueError("autoApprove lists each risk level once")
        return self


def _catalog_risk_rules() -> list[dict[str, str]]:
    """One CEL rule per risk level above low: a step calling an action of the catalog with
    that minimum risk declares at least that risk (generated from humanwork_core.catalog)."""
    rules = []
    levels = list(Risk)
    for minimum in levels[1:]:
        by_tool = catalog.side_effect_actions(minimum)
        if not by_tool:
            continue
        allowed = ", ".join(f"'{r.value}'" for r in levels[minimum.rank :])
        calls = " || ".join(
            f"(self.tool == '{tool}' && self.parameters.action in [{', '.join(map(repr, names))}])"
            for tool, names in sorted(by_tool.items())
        )
        rules.append(
            cel(
                f"!(has(self.tool) && has(self.parameters.action) && ({calls})) "
                f"|| self.risk in [{allowed}]",
                f"this action's risk is at least {minimum.value} (the action catalog's minimum; "
                "GET /tools lists it)",
                field_path=".risk",
            )
        )
    return rules


class Step(ResourceModel):
    """One step of the plan."""

    model_config = ConfigDict(
        json_schema_extra=k8s(
            rules=[
                cel(
                    "self.kind != 'action' || has(self.tool)",
                    "an action step names the tool it calls",
                    field_path=".tool",
                ),
                *_catalog_risk_rules(),
                cel(
                    "!has(self.options) || self.kind == 'input'",
                    "only input steps have options",
                    field_path=".options",
                ),
                cel(
                    "!has(self.options) || size(self.options) >= 2",
                    "an input step with options offers at least two options",
                    field_path=".options",
                ),
            ]
        )
    )

    id: StepId = Field(description="Identifier of the step, unique in the plan.")
    description: str = Field(
        description="What the step does, in words the expert reads before deciding.",
        min_length=1,
        max_length=4096,
    )
    kind: StepKind = Field(
        default=StepKind.ACTION,
        description="action (calls a tool) or input (asks the expert for content or a choice).",
    )
    tool: str | None = Field(
        default=None,
        description="Tool the step calls, for example shopify_query; required for actions.",
        min_length=1,
        max_length=63,
        pattern=r"^[a-z][a-z0-9_]*$",
    )
    parameters: FreeForm = Field(
        default_factory=dict,
        description="Tool parameters, a JSON object: `action` (an action of the tool, see "
        "`GET /tools`) and that action's `params`.",
        json_schema_extra={
            **k8s(preserve_unknown_fields=True),
            "properties": {
                "action": {
                    "type": "string",
                    "maxLength": 100,
                    "description": "The action of the tool the step calls.",
                }
            },
        },
    )
    risk: Risk = Field(
        description="Risk level: low, medium, high or critical; never below the action "
        "catalog's minimum for the step's action (writes are at least high)."
    )
    options: tuple[Option, ...] | None = Field(
        default=None,
        description="Choices offered by a select-type input step (at least two).",
        max_length=MAX_OPTIONS,
        json_schema_extra=k8s(list_type="set"),
    )

    @model_validator(mode="after")
    def _shape(self) -> Self:
        if self.kind is StepKind.ACTION and self.tool is None:
            raise ValueError("an action step names the tool it calls")
        if self.options is not None:
            if self.kind is not StepKind.INPUT:
                raise ValueError("only input steps have options")
            if len(self.options) < 2:
                raise ValueError("an input step with options offers at least two options")
            if len(set(self.options)) != len(self.options):
                raise ValueError("options must be unique")
        return self


class AgenticTaskSpec(ResourceModel):
    """The plan: who asked, for which org and agent, under which policy, and its steps.
    Immutable after creation; a revised plan is a new task naming the one it revises."""

    org_id: str = Field(
        description="UUID of the client org; must equal the namespace's humanwork.io/org-id "
        "label. Immutable.",
        pattern=UUID_PATTERN,
        max_length=36,
        json_schema_extra=k8s(
            format="uuid",
            rules=[cel("self == oldSelf", "spec.orgId is immutable", reason="FieldValueForbidden")],
        ),
    )
    agent_ref: AgentRef = Field(
        description="The AgentInstance that proposed the plan and executes it. Immutable.",
        json_schema_extra=k8s(
            rules=[
                cel("self == oldSelf", "spec.agentRef is immutable", reason="FieldValueForbidden")
            ]
        ),
    )
    conversation_id: str | None = Field(
        default=None,
        description="UUID of the conversation the task came from.",
        pattern=UUID_PATTERN,
        max_length=36,
        json_schema_extra=k8s(format="uuid"),
    )
    description: str = Field(
        description="What the client asked for, in one sentence.",
        min_length=1,
        max_length=4096,
    )
    requested_by: str = Field(
        description="Who asked for the work (user id or e-mail).",
        min_length=1,
        max_length=253,
    )
    revision_of: str | None = Field(
        default=None,
        description="Name of the AgenticTask (same namespace) whose plan this one revises.",
        max_length=253,
        pattern=NAME_PATTERN,
    )
    policy: TaskPolicy = Field(
        default_factory=TaskPolicy,
        description="Approval policy: auto-approval, deadlines, escalation and quorum. Immutable.",
        json_schema_extra=k8s(
            default={},
            rules=[
                cel("self == oldSelf", "spec.policy is immutable", reason="FieldValueForbidden")
            ],
        ),
    )
    steps: tuple[Step, ...] = Field(
        description="The ordered steps of the plan (at least one). Immutable.",
        min_length=1,
        max_length=MAX_STEPS,
        json_schema_extra=k8s(
            list_map_keys=["id"],
            rules=[
                cel(
                    "self == oldSelf",
                    "spec.steps is immutable: the plan cannot change after creation; "
                    "create a new AgenticTask with spec.revisionOf instead",
                    reason="FieldValueForbidden",
                ),
                cel(
                    "self.all(s, self.exists_one(t, t.id == s.id))",
                    "step ids must be unique",
                    reason="FieldValueDuplicate",
                ),
            ],
        ),
    )

    @model_validator(mode="after")
    def _unique_step_ids(self) -> Self:
        counts = Counter(step.id for step in self.steps)
        duplicates = sorted(i for i, n in counts.items() if n > 1)
        if duplicates:
            raise ValueError(f"step ids must be unique; repeated: {', '.join(duplicates)}")
        return self

    @property
    def step_ids(self) -> tuple[str, ...]:
        """The step ids in plan order."""
        return tuple(step.id for step in self.steps)


# --- status --------------------------------------------------------------------------------


class Decision(ResourceModel):
    """One expert's decision on a step (also the shape of each recorded approval)."""

    model_config = ConfigDict(
        json_schema_extra=k8s(
            rules=[
                cel(
                    "self.verdict != 'edit' || has(self.parameters)",
                    "an edit carries the amended parameters",
                ),
                cel(
                    "self.verdict != 'provide' || has(self.input)",
                    "a provide decision carries the input",
                ),
                cel(
                    "self.verdict != 'select' || has(self.selection)",
                    "a select decision carries the selected option",
                ),
            ]
        )
    )

    verdict: Verdict = Field(description="approve, edit, provide, select or reject.")
    by: str = Field(
        description="Who decided: the expert's user id, or policy:auto-approve.",
        min_length=1,
        max_length=253,
    )
    at: AwareDatetime = Field(description="When the decision was made.")
    feedback: str | None = Field(
        default=None,
        description="The expert's note; on a rejection it goes back to the agent.",
        max_length=4096,
    )
    parameters: FreeForm | None = Field(
        default=None,
        description="Amended tool parameters (verdict edit); they replace the plan's.",
        json_schema_extra=k8s(preserve_unknown_fields=True),
    )
    input: FreeForm | None = Field(
        default=None,
        description="Content supplied by the expert (verdict provide).",
        json_schema_extra=k8s(preserve_unknown_fields=True),
    )
    selection: str | None = Field(
        default=None,
        description="The option picked (verdict select); one of the step's options.",
        min_length=1,
        max_length=256,
    )
    idempotency_key: str = Field(
        description="Client-chosen key that makes a retried decision a no-op.",
        min_length=1,
        max_length=128,
    )
    step_hash: str = Field(
        description="SHA-256 of the step the expert saw (taskflow.step_hash); binds the "
        "decision to exactly that step.",
        pattern=SHA256_PATTERN,
        max_length=64,
    )

    @model_validator(mode="after")
    def _payload(self) -> Self:
        if self.verdict is Verdict.EDIT and self.parameters is None:
            raise ValueError("an edit carries the amended parameters")
        if self.verdict is Verdict.PROVIDE and self.input is None:
            raise ValueError("a provide decision carries the input")
        if self.verdict is Verdict.SELECT and self.selection is None:
            raise ValueError("a select decision carries the selected option")
        return self


class Execution(ResourceModel):
    """The agent's run of an approved step."""

    state: ExecutionState = Field(description="Running, Succeeded, Failed or OutcomeUnknown.")
    attempt: int = Field(default=1, ge=1, le=100, description="Attempt number, from 1.")
    started_at: AwareDatetime = Field(description="When the current attempt started.")
    finished_at: AwareDatetime | None = Field(
        default=None, description="When the step finished (Succeeded or Failed)."
    )
    result: FreeForm | None = Field(
        default=None,
        description="Summary of the tool's result, a free-form JSON object.",
        json_schema_extra=k8s(preserve_unknown_fields=True),
    )
    error: str | None = Field(default=None, description="Why the step failed.", max_length=4096)


class Resolution(ResourceModel):
    """An expert's resolution of a step whose tool call ended with an unknown outcome
    (written by the platform API)."""

    outcome: Outcome = Field(
        description="applied: the side effect happened (the step completes with it); "
        "not_applied: it did not (the agent may call once more)."
    )
    attempt: int = Field(ge=1, le=100, description="The execution attempt it resolves.")
    by: str = Field(description="The expert's user id.", min_length=1, max_length=253)
    at: AwareDatetime = Field(description="When it was resolved.")
    note: str | None = Field(
        default=None, description="What the expert checked upstream.", max_length=4096
    )


class StepStatus(ResourceModel):
    """Observed state of one step; each part is written by a different component."""

    id: StepId = Field(description="Id of the step in spec.steps.")
    state: StepState | None = Field(
        default=None, description="Derived lifecycle state (written by the operator)."
    )
    approvals: tuple[Decision, ...] = Field(
        default=(),
        description="Approvals recorded so far, one per distinct expert (written by the "
        "platform API); the decision is set when enough have been given.",
        max_length=MAX_APPROVALS,
        json_schema_extra=k8s(list_map_keys=["by"]),
    )
    decision: Decision | None = Field(
        default=None,
        description="The effective decision (written once by the platform API, never changed).",
    )
    execution: Execution | None = Field(
        default=None, description="The agent's run of the step (written by the agent)."
    )
    resolution: Resolution | None = Field(
        default=None,
        description="An expert's resolution of an OutcomeUnknown execution (written by the "
        "platform API).",
    )
    deadline: AwareDatetime | None = Field(
        default=None, description="When the pending decision is due (written by the operator)."
    )
    escalations: int = Field(
        default=0,
        ge=0,
        le=100,
        description="How many times the decision deadline was missed and escalated.",
    )


class AgenticTaskStatus(ResourceModel):
    """Observed state of the task, shared by the platform API, the agent and the operator."""

    phase: TaskPhase | None = Field(
        default=None,
        description="PendingApproval, InProgress, Completed, Rejected, Failed, Cancelled or "
        "Expired (written by the operator).",
    )
    current_step: StepId | None = Field(
        default=None, description="Id of the first step not yet executed."
    )
    highest_pending_risk: Risk | None = Field(
        default=None, description="Highest risk among the steps not yet executed."
    )
    next_deadline: AwareDatetime | None = Field(
        default=None, description="Deadline of the decision the task is waiting for."
    )
    steps: tuple[StepStatus, ...] = Field(
        default=(),
        description="Per-step decisions, executions, deadlines and escalations, keyed by id.",
        max_length=MAX_STEPS,
        json_schema_extra=k8s(list_map_keys=["id"]),
    )
    conditions: tuple[Condition, ...] = conditions_field(
        "Conditions of the task, per the API conventions."
    )
    observed_generation: int | None = Field(
        default=None, ge=0, description="The metadata.generation this status reflects."
    )
    started_at: AwareDatetime | None = Field(
        default=None, description="When the operator first saw the task."
    )
    completed_at: AwareDatetime | None = Field(
        default=None, description="When the task reached a terminal phase."
    )

    def step(self, step_id: str) -> StepStatus:
        """The status of a step; an empty one when nothing was recorded yet."""
        for entry in self.steps:
            if entry.id == step_id:
                return entry
        return StepStatus(id=step_id)

    def with_step(self, entry: StepStatus) -> AgenticTaskStatus:
        """A copy with the status of `entry.id` replaced (or appended)."""
        steps = list(self.steps)
        for index, existing in enumerate(steps):
            if existing.id == entry.id:
                steps[index] = entry
                break
        else:
            steps.append(entry)
        return self.model_copy(update={"steps": tuple(steps)})


class AgenticTask(KubeResource):
    """A multi-step plan proposed by an agent; each step waits for an expert's decision."""

    crd: ClassVar[CrdInfo] = CrdInfo(
        kind="AgenticTask",
        plural="agentictasks",
        singular="agentictask",
        short_names=("at", "task"),
        printer_columns=(
            PrinterColumn("Phase", "string", ".status.phase", "Phase of the task."),
            PrinterColumn("Step", "string", ".status.currentStep", "First step not executed."),
            PrinterColumn(
                "Risk", "string", ".status.highestPendingRisk", "Highest risk still ahead."
            ),
            PrinterColumn(
                "Deadline",
                "string",
                ".status.nextDeadline",
                "When the awaited decision is due.",
                format="date-time",
            ),
            PrinterColumn("Age", "date", ".metadata.creationTimestamp", "Time since creation."),
        ),
        selectable_fields=(".spec.orgId", ".spec.agentRef.name", ".status.phase"),
    )
    spec_model: ClassVar[type[ResourceModel]] = AgenticTaskSpec
    status_model: ClassVar[type[ResourceModel]] = AgenticTaskStatus

    kind: str = Field(default="AgenticTask", description="Kind of the object.")
    spec: AgenticTaskSpec = Field(description="The plan.")
    status: AgenticTaskStatus | None = Field(
        default=None, description="Decisions, executions and the derived phase."
    )

    def step(self, step_id: str) -> Step | None:
        """The plan's step of that id, or None."""
        return next((s for s in self.spec.steps if s.id == step_id), None)

    def current_status(self) -> AgenticTaskStatus:
        """The status, or an empty one before any writer touched it."""
        return self.status if self.status is not None else AgenticTaskStatus()
