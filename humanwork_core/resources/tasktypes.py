"""The AgenticTask's vocabulary: its limits, the kinds, phases, states, verdicts and
outcomes, and the constrained strings its spec and status share."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import Field, JsonValue

from .common import (
    NAME_PATTERN,
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
    AWAITING_CLIENT = "AwaitingClient"
    """Approved by the experts; waits for the initiating client's confirmation."""


class ConfirmationState(StrEnum):
    """Where the initiating client's confirmation of a step stands."""

    WAITING = "waiting"
    CONFIRMED = "confirmed"
    DECLINED = "declined"


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


class OnExpiry(StrEnum):
    """What a decision that ran out of time (deadline passed, escalations spent) does."""

    AWAIT_REOPEN = "AwaitReopen"
    """The run stays blocked on the step until an expert reopens it with a new deadline
    (seed 001: "the run stays blocked for a fresh escalation")."""
    END = "End"
    """The task ends in phase Expired."""


class Outcome(StrEnum):
    """An expert's finding on a step whose outcome was unknown, or their retry of a step
    that failed."""

    APPLIED = "applied"
    NOT_APPLIED = "not_applied"
    RETRY = "retry"
    """The step failed and its action is safe to retry: the agent runs it once more."""


StepId = Annotated[str, Field(min_length=1, max_length=63, pattern=NAME_PATTERN)]


Option = Annotated[str, Field(min_length=1, max_length=256)]
