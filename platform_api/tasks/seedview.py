"""Seed 000's view of a task: its snake_case `status` beside the phase, and each step's
`order` and status, as the clients of the seed's contract read them.

Pure functions over the resource models (the current time is an argument). The project's
phases and step states are richer than the seed's statuses; the mapping is total and is
documented in docs/api.md ("The seed's statuses") and docs/seed-deviations.md:

- task: `PendingApproval` -> `pending_approval`; `InProgress` -> `approved` while the step
  ahead has its approval and the agent has not started it, `in_progress` otherwise;
  `Completed`, `Rejected`, `Failed` -> the same word; beyond the seed, `Cancelled` ->
  `cancelled` and `Expired` -> `expired`.
- step: `Pending`, `Escalated` (its deadline passed, still decidable) and `Expired` (never
  decided) -> `pending`; `Approved`, `Executing` (approved, running) and `OutcomeUnknown`
  (approved, ran, not known to have taken effect: an expert resolves it) -> `approved`;
  `Executed` -> `executed`; `Failed` -> `failed`; `Rejected` -> `rejected`.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, Field

from humanwork_core import taskflow
from humanwork_core.resources import AgenticTask, StepState, TaskPhase


class SeedTaskStatus(StrEnum):
    """A task's status in seed 000's words (plus `cancelled` and `expired`, which the
    seed does not have)."""

    PENDING_APPROVAL = "pending_approval"
    APPROVED = "approved"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    REJECTED = "rejected"
    FAILED = "failed"
    CANCELLED = "cancelled"
    EXPIRED = "expired"


class SeedStepStatus(StrEnum):
    """A step's status in seed 000's words."""

    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXECUTED = "executed"
    FAILED = "failed"


STEP_STATUS: dict[StepState, SeedStepStatus] = {
    StepState.PENDING: SeedStepStatus.PENDING,
    StepState.ESCALATED: SeedStepStatus.PENDING,
    StepState.EXPIRED: SeedStepStatus.PENDING,
    StepState.AWAITING_CLIENT: SeedStepStatus.PENDING,
    StepState.APPROVED: SeedStepStatus.APPROVED,
    StepState.EXECUTING: SeedStepStatus.APPROVED,
    StepState.OUTCOME_UNKNOWN: SeedStepStatus.APPROVED,
    StepState.EXECUTED: SeedStepStatus.EXECUTED,
    StepState.FAILED: SeedStepStatus.FAILED,
    StepState.REJECTED: SeedStepStatus.REJECTED,
}
"""Every step state onto the seed's step status (total: a test checks every member)."""

_PHASE_STATUS: dict[TaskPhase, SeedTaskStatus] = {
    TaskPhase.PENDING_APPROVAL: SeedTaskStatus.PENDING_APPROVAL,
    TaskPhase.IN_PROGRESS: SeedTaskStatus.IN_PROGRESS,
    TaskPhase.COMPLETED: SeedTaskStatus.COMPLETED,
    TaskPhase.REJECTED: SeedTaskStatus.REJECTED,
    TaskPhase.FAILED: SeedTaskStatus.FAILED,
    TaskPhase.CANCELLED: SeedTaskStatus.CANCELLED,
    TaskPhase.EXPIRED: SeedTaskStatus.EXPIRED,
}


class SeedStep(BaseModel):
    """One step of the plan as seed 000 shows it, beside the project's own state."""

    step_id: str = Field(description="the step's id in the plan (`spec.steps[].id`)")
    order: int = Field(ge=1, description="the step's place in the plan, from 1")
    status: SeedStepStatus = Field(
        description="seed 000's step status: `pending` (Pending, Escalated, Expired, "
        "AwaitingClient), "
        "`approved` (Approved, Executing, OutcomeUnknown), `executed`, `failed`, `rejected`"
    )
    state: StepState = Field(description="the project's own state of the step")
    expert_feedback: str | None = Field(
        default=None, description="the feedback of the step's decision, if any"
    )


def step_status(state: StepState) -> SeedStepStatus:
    """Seed 000's status of a step in `state`."""
    return STEP_STATUS[state]


def task_status(phase: TaskPhase, ahead: StepState | None) -> SeedTaskStatus:
    """Seed 000's status of a task in `phase` whose first step not yet executed is in
    state `ahead` (None once every step executed)."""
    if phase is TaskPhase.IN_PROGRESS and ahead is StepState.APPROVED:
        return SeedTaskStatus.APPROVED
    return _PHASE_STATUS[phase]


def seed_status(task: AgenticTask, phase: TaskPhase, now: datetime) -> SeedTaskStatus:
    """Seed 000's status of `task`, shown in `phase` (recorded or derived)."""
    ahead = taskflow.current_step(task)
    return task_status(phase, None if ahead is None else taskflow.step_state(task, ahead, now))


def seed_steps(task: AgenticTask, now: datetime) -> list[SeedStep]:
    """Every step of the plan in order, with its 1-based `order` and seed 000's status
    (the state derived from its decision, execution and the time, so it is current even
    before the operator's next pass)."""
    status = task.current_status()
    views = []
    for order, step in enumerate(task.spec.steps, start=1):
        state = taskflow.step_state(task, step.id, now)
        decision = status.step(step.id).decision
        views.append(
            SeedStep(
                step_id=step.id,
                order=order,
                status=step_status(state),
                state=state,
                expert_feedback=decision.feedback if decision is not None else None,
            )
        )
    return views
