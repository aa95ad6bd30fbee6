"""The AgenticTask's status: per step the experts' approvals and decision, the initiating
client's confirmation, the agent's execution and an expert's resolution, and the
operator's derived fields. Each writer
owns its fields (see :mod:`humanwork_core.taskflow`)."""

from __future__ import annotations

from typing import Self

from pydantic import AwareDatetime, ConfigDict, Field, model_validator

from ..risk import Risk
from .common import (
    SHA256_PATTERN,
    Condition,
    ResourceModel,
    cel,
    conditions_field,
    k8s,
)
from .tasktypes import (
    MAX_APPROVALS,
    MAX_STEPS,
    ConfirmationState,
    ExecutionState,
    FreeForm,
    Outcome,
    StepId,
    StepState,
    TaskPhase,
    Verdict,
)


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
    """An expert's resolution of a step whose tool call ended with an unknown outcome, or
    their retry of a step that failed (written by the platform API)."""

    outcome: Outcome = Field(
        description="applied: the side effect happened (the step completes with it); "
        "not_applied: it did not (the agent may call once more); retry: the step failed, its "
        "action is safe to retry, and the agent runs it once more."
    )
    attempt: int = Field(ge=1, le=100, description="The execution attempt it resolves.")
    by: str = Field(description="The expert's user id.", min_length=1, max_length=253)
    at: AwareDatetime = Field(description="When it was resolved.")
    note: str | None = Field(
        default=None, description="What the expert checked upstream.", max_length=4096
    )


class Reopening(ResourceModel):
    """An expert's reopening of a step whose decision expired: a new deadline (written by
    the platform API; the operator then gives the step that deadline)."""

    by: str = Field(description="The expert's user id.", min_length=1, max_length=253)
    at: AwareDatetime = Field(description="When it was reopened.")
    deadline_seconds: int = Field(
        ge=60, le=30 * 86400, description="The new deadline, in seconds after `at`."
    )
    count: int = Field(default=1, ge=1, le=100, description="How many times it was reopened.")
    reason: str | None = Field(default=None, description="Why it was reopened.", max_length=4096)


class Confirmation(ResourceModel):
    """The initiating client's confirmation of a high-stakes step (written by the platform
    API only): required from the start when the org's rules name the step's risk, then
    confirmed or declined by that client. Bound to the step as the client saw it
    (`step_hash`, taskflow.confirmation_hash): an expert's edit voids a confirmation."""

    model_config = ConfigDict(
        json_schema_extra=k8s(
            rules=[
                cel(
                    "self.state == 'waiting' || (has(self.by) && has(self.at))",
                    "a confirmation or a decline says who and when",
                ),
                cel(
                    "self.state != 'confirmed' || has(self.stepHash)",
                    "a confirmation carries the hash of the step confirmed",
                ),
                cel(
                    "self.state != 'declined' || has(self.reason)",
                    "a decline carries the client's reason",
                ),
            ]
        )
    )

    required: bool = Field(description="Whether the step waits for the client's confirmation.")
    state: ConfirmationState = Field(description="waiting, confirmed or declined.")
    by: str | None = Field(
        default=None,
        description="The initiating client's username (the task's vouched requester).",
        min_length=1,
        max_length=253,
    )
    at: AwareDatetime | None = Field(default=None, description="When it was confirmed or declined.")
    reason: str | None = Field(
        default=None,
        description="The client's reason for a decline (fed back to the agent).",
        min_length=1,
        max_length=4096,
    )
    step_hash: str | None = Field(
        default=None,
        description="SHA-256 of the step as the client confirmed it, amended parameters "
        "included (taskflow.confirmation_hash).",
        pattern=SHA256_PATTERN,
        max_length=64,
    )

    @model_validator(mode="after")
    def _complete(self) -> Self:
        if self.state is not ConfirmationState.WAITING and (self.by is None or self.at is None):
            raise ValueError("a confirmation or a decline says who and when")
        if self.state is ConfirmationState.CONFIRMED and self.step_hash is None:
            raise ValueError("a confirmation carries the hash of the step confirmed")
        if self.state is ConfirmationState.DECLINED and self.reason is None:
            raise ValueError("a decline carries the client's reason")
        return self


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
    confirmation: Confirmation | None = Field(
        default=None,
        description="The initiating client's confirmation of a high-stakes step (written by "
        "the platform API).",
    )
    execution: Execution | None = Field(
        default=None, description="The agent's run of the step (written by the agent)."
    )
    resolution: Resolution | None = Field(
        default=None,
        description="An expert's resolution of an OutcomeUnknown execution (written by the "
        "platform API).",
    )
    reopened: Reopening | None = Field(
        default=None,
        description="The last reopening of the step after its decision expired (written by "
        "the platform API).",
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
