"""The AgenticTask custom resource: one plan of steps, each waiting for a human's decision.

The spec (the plan) is written once by its creator and is immutable. Three writers share the
status, each owning its own fields (enforced by the admission policies in
manifests/base/policies/): the platform API writes each step's `approvals` and `decision`,
the agent writes each step's `execution`, the platform API also writes an expert's
`resolution` of an execution whose outcome is unknown, the operator writes everything else (phase,
current step, step states, deadlines, escalations, conditions). The rules every writer
follows live in :mod:`humanwork_core.taskflow`.

This module holds the spec (the plan and its policy) and the resource;
:mod:`.tasktypes` the shared vocabulary and :mod:`.taskstatus` the status models, both
re-exported here.
"""

from __future__ import annotations

from collections import Counter
from typing import ClassVar, Self

from pydantic import ConfigDict, Field, model_validator

from .. import catalog
from ..risk import Risk
from .common import (
    DNS_LABEL_PATTERN,
    NAME_PATTERN,
    UUID_PATTERN,
    CrdInfo,
    KubeResource,
    PrinterColumn,
    ResourceModel,
    cel,
    k8s,
)
from .taskstatus import (
    AgenticTaskStatus,
    Confirmation,
    Decision,
    Execution,
    Reopening,
    Resolution,
    StepStatus,
)
from .tasktypes import (
    DAY_SECONDS,
    MAX_APPROVALS,
    MAX_OPTIONS,
    MAX_STEPS,
    ConfirmationState,
    ExecutionState,
    FreeForm,
    OnExpiry,
    Option,
    Outcome,
    StepId,
    StepKind,
    StepState,
    TaskPhase,
    Verdict,
)

__all__ = [
    "DAY_SECONDS",
    "MAX_APPROVALS",
    "MAX_OPTIONS",
    "MAX_STEPS",
    "AgentRef",
    "AgenticTask",
    "AgenticTaskSpec",
    "AgenticTaskStatus",
    "Confirmation",
    "ConfirmationState",
    "Decision",
    "EscalationPolicy",
    "Execution",
    "ExecutionState",
    "FreeForm",
    "OnExpiry",
    "Option",
    "Outcome",
    "Reopening",
    "RequiredApprovals",
    "Resolution",
    "Step",
    "StepId",
    "StepKind",
    "StepState",
    "StepStatus",
    "TaskPhase",
    "TaskPolicy",
    "Verdict",
]


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
    on_expiry: OnExpiry = Field(
        default=OnExpiry.AWAIT_REOPEN,
        description="When a decision runs out of time (deadline passed, escalations spent): "
        "AwaitReopen (default, seed 001) keeps the task waiting on that step, undecidable, "
        "until an expert reopens it with a new deadline (POST "
        "/human-tasks/{ns}/{name}/{step}/reopen); End ends the task in phase Expired.",
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
        description="Tool the step calls (a tool of the action catalog, e.g. shopify); required "
        "for actions.",
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
        root_rules=(
            cel(  # the revision loop: no task becomes another's revision later
                "has(self.spec.revisionOf) == has(oldSelf.spec.revisionOf) && "
                "(!has(self.spec.revisionOf) || self.spec.revisionOf == oldSelf.spec.revisionOf)",
                "spec.revisionOf is immutable: a revision names the plan it revises when it "
                "is created",
                reason="FieldValueForbidden",
            ),
        ),
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
