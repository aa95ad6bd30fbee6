"""The moves the task's rules refuse: one error per rule, each with its stable code."""

from __future__ import annotations

from ..errors import HumanworkError


class TaskFlowError(HumanworkError):
    """A move the task's rules do not allow; `code` says which rule."""

    code = "task_flow_error"

    def __init__(self, message: str, *, step_id: str | None = None) -> None:
        details = {"stepId": step_id} if step_id is not None else {}
        super().__init__(message, **details)
        self.step_id = step_id


class TaskTerminal(TaskFlowError):
    """The task is Completed, Rejected, Failed, Cancelled or Expired: nothing more happens."""

    code = "task_terminal"


class StepNotFound(TaskFlowError):
    """The plan has no step of that id."""

    code = "step_not_found"


class StepNotDecidable(TaskFlowError):
    """The step is not the first undecided one, or an earlier step has not executed yet."""

    code = "step_not_decidable"


class StepAlreadyDecided(TaskFlowError):
    """The step already has its decision; decisions are never changed."""

    code = "step_already_decided"


class HumanTaskExpired(TaskFlowError):
    """The decision deadline passed and the escalation budget is spent."""

    code = "human_task_expired"


class StepHashMismatch(TaskFlowError):
    """The decision (or approval) was made on a different version of the step."""

    code = "step_hash_mismatch"


class InvalidDecision(TaskFlowError):
    """The verdict does not fit the step (e.g. select on an action) or lacks its payload."""

    code = "invalid_decision"


class EditChangesAction(TaskFlowError):
    """An edit may amend an action's parameters, not swap the action for another one (whose
    risk and quorum the approvers did not weigh): a different action is a new plan."""

    code = "edit_changes_action"


class DuplicateApprover(TaskFlowError):
    """This expert already approved the step; further approvals must come from others."""

    code = "duplicate_approver"


class ApprovalConflict(TaskFlowError):
    """The approval amends the step differently from the approvals already given."""

    code = "approval_conflict"


class IdempotencyConflict(TaskFlowError):
    """The idempotency key was already used for a different decision."""

    code = "idempotency_conflict"


class NotApproved(TaskFlowError):
    """The step has no approving decision (yet, or it was rejected)."""

    code = "not_approved"


class StepNotExecutable(TaskFlowError):
    """An earlier step has not executed yet."""

    code = "step_not_executable"


class ExecutionConflict(TaskFlowError):
    """The execution is not in a state that allows this move (e.g. finishing twice)."""

    code = "execution_conflict"


class NotUnknown(TaskFlowError):
    """Only a step whose outcome is unknown (and not yet resolved) can be resolved."""

    code = "outcome_not_unknown"


class NotFailed(TaskFlowError):
    """Only a step whose execution failed (and was not retried yet) can be retried."""

    code = "step_not_failed"


class NotRetrySafe(TaskFlowError):
    """The step's action is not safe to run twice (a write that is not idempotent): the
    action catalog's `retry_safe` is false, so a failed step stays failed."""

    code = "step_not_retryable"


class NotExpired(TaskFlowError):
    """Only the current step whose decision expired, in a task whose policy awaits a
    reopening (`onExpiry: AwaitReopen`), can be reopened."""

    code = "decision_not_expired"


class ToolCallMismatch(TaskFlowError):
    """The tool call differs from the approved step (tool or parameters)."""

    code = "tool_call_mismatch"


class NotConfirmed(TaskFlowError):
    """The step needs the initiating client's confirmation of its current version (an
    expert's edit voids an earlier one), and has none."""

    code = "not_confirmed"


class ConfirmationNotRequired(TaskFlowError):
    """The step needs no client confirmation: nothing to confirm or decline."""

    code = "confirmation_not_required"


class ConfirmationStale(TaskFlowError):
    """The client confirmed another version of the step than the task holds (an expert
    edited it since): the client must look again and confirm the new values."""

    code = "confirmation_stale"


class StepDeclined(TaskFlowError):
    """The client already declined the step; a decline is never changed."""

    code = "step_declined"


class StepConfirmationClosed(TaskFlowError):
    """The step already ran (or is running): too late to confirm or decline it."""

    code = "confirmation_closed"
