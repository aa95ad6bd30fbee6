"""The rules of an AgenticTask's life: the one place every writer takes them from.

Pure functions over the resource models; the current time is always an argument. Each
writer calls the function for its own move and writes only the fields it owns:

- the platform API: :func:`decide` and :func:`auto_approve` (step `approvals` and
  `decision`), :func:`require_confirmation`, :func:`confirm` and :func:`decline` (step
  `confirmation`), and :func:`authorize_tool_call` before it runs a tool for the agent;
- the agent: :func:`start_execution` and :func:`finish_execution` (step `execution`);
- the operator: :func:`tick` and :func:`cancel` (phase, step states, deadlines,
  escalations, current step, highest pending risk, next deadline, timestamps).

:func:`owned_status` cuts a writer's part out of a status for its server-side apply; the
admission policies in manifests/base/policies/ enforce the same partition.

The rules: only the first undecided step can be decided, and only once every earlier step
executed; a rejection halts the task; a step needs as many approvals from distinct experts
as its risk requires (a decision is recorded once, never changed); only a read-only action
whose effective risk is `low` auto-approves, and only where the org opted in
(`autoApproveLow`) and the task asks (:mod:`humanwork_core.policy`; none by default); a
step's risk is never below the action catalog's minimum for its action
(:func:`humanwork_core.policy.effective_risk`); a missed deadline escalates (the step stays
decidable with a new deadline) until the budget is spent, then the step and the task expire;
a step executes only when approved and after every earlier step executed; terminal phases
never change, but for one: a task that failed because a step's tool call failed is reopened
when an expert retries that step (:func:`retry`, only where the action catalog says the
action is safe to retry). A decision is bound to the exact step the expert saw by
:func:`step_hash`. A step the platform marked as needing the initiating client's
confirmation executes only when approved AND confirmed (either order); the confirmation is
bound to the step with its amended parameters (:func:`confirmation_hash`: an expert's edit
voids it), the step's deadline covers the wait for the client too, and a decline halts the
task like a rejection.

The package holds one module per role: :mod:`.state` (hashing and reading the state),
:mod:`.decisions` (the platform API's moves), :mod:`.execution` (the agent's moves and the
expert's resolution), :mod:`.lifecycle` (the operator's moves), :mod:`.writers` (who owns
which field) and :mod:`.errors`; every name is re-exported here (`taskflow.<name>`).
"""

from __future__ import annotations

from .confirmations import confirm, decline, require_confirmation
from .decisions import AUTO_APPROVER, DecisionRequest, authorize_tool_call, auto_approve, decide
from .errors import (
    ApprovalConflict,
    ConfirmationNotRequired,
    ConfirmationStale,
    DuplicateApprover,
    EditChangesAction,
    ExecutionConflict,
    HumanTaskExpired,
    IdempotencyConflict,
    InvalidDecision,
    NotApproved,
    NotConfirmed,
    NotExpired,
    NotFailed,
    NotRetrySafe,
    NotUnknown,
    StepAlreadyDecided,
    StepConfirmationClosed,
    StepDeclined,
    StepHashMismatch,
    StepNotDecidable,
    StepNotExecutable,
    StepNotFound,
    TaskFlowError,
    TaskTerminal,
    ToolCallMismatch,
)
from .execution import MAX_ATTEMPTS, finish_execution, resolve, retry, start_execution
from .lifecycle import cancel, tick
from .reopen import reopen
from .state import (
    awaiting_resolution,
    awaiting_retry,
    awaits_client,
    canonical_json,
    client_wait_step,
    confirmation_hash,
    confirmation_parameters,
    current_step,
    decidable_step,
    derive_phase,
    effective_parameters,
    executable_step,
    highest_pending_risk,
    is_approved,
    is_confirmed,
    is_declined,
    is_executed,
    is_expired,
    is_outcome_unknown,
    is_rejected,
    is_resolved,
    is_retried,
    needs_confirmation,
    reopened,
    reopened_deadline,
    required_approvals,
    step_hash,
    step_state,
    wait_expired,
)
from .writers import OPERATOR_STATUS_FIELDS, STEP_FIELDS, Writer, owned_status

__all__ = [
    "AUTO_APPROVER",
    "MAX_ATTEMPTS",
    "OPERATOR_STATUS_FIELDS",
    "STEP_FIELDS",
    "ApprovalConflict",
    "ConfirmationNotRequired",
    "ConfirmationStale",
    "DecisionRequest",
    "DuplicateApprover",
    "EditChangesAction",
    "ExecutionConflict",
    "HumanTaskExpired",
    "IdempotencyConflict",
    "InvalidDecision",
    "NotApproved",
    "NotConfirmed",
    "NotExpired",
    "NotFailed",
    "NotRetrySafe",
    "NotUnknown",
    "StepAlreadyDecided",
    "StepConfirmationClosed",
    "StepDeclined",
    "StepHashMismatch",
    "StepNotDecidable",
    "StepNotExecutable",
    "StepNotFound",
    "TaskFlowError",
    "TaskTerminal",
    "ToolCallMismatch",
    "Writer",
    "authorize_tool_call",
    "auto_approve",
    "awaiting_resolution",
    "awaiting_retry",
    "awaits_client",
    "cancel",
    "canonical_json",
    "client_wait_step",
    "confirm",
    "confirmation_hash",
    "confirmation_parameters",
    "current_step",
    "decidable_step",
    "decide",
    "decline",
    "derive_phase",
    "effective_parameters",
    "executable_step",
    "finish_execution",
    "highest_pending_risk",
    "is_approved",
    "is_confirmed",
    "is_declined",
    "is_executed",
    "is_expired",
    "is_outcome_unknown",
    "is_rejected",
    "is_resolved",
    "is_retried",
    "needs_confirmation",
    "owned_status",
    "reopen",
    "reopened",
    "reopened_deadline",
    "require_confirmation",
    "required_approvals",
    "resolve",
    "retry",
    "start_execution",
    "step_hash",
    "step_state",
    "tick",
    "wait_expired",
]
