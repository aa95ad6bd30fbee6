"""Request and response bodies of `/human-tasks`."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from platform_api.mcp_servers.schemas import ToolDefinitionRead

ITEM_EXAMPLE: dict[str, Any] = {
    "id": "org-acme/task-7x2kq/write",
    "task_id": "org-acme/task-7x2kq",
    "run_id": "3d0f6a4e-5b1c-4f7e-9a0b-1c2d3e4f5a6b",
    "org_id": "6f1c2b9e-2d8a-4c55-9a57-0e4f3d2b1a90",
    "workflow": "acme-ecommerce",
    "summary": "Reconcile all Amazon orders for October and update Shopify",
    "requested_by": "ops-lead",
    "step_id": "write",
    "step_description": "Take 3 units of HW-MUG-001 off the warehouse stock",
    "kind": "action",
    "tool": "shopify",
    "risk": "high",
    "status": "pending",
    "deadline": "2026-01-01T13:00:00Z",
    "escalations": 0,
    "near_deadline": False,
    "age_seconds": 120,
}


class HumanTask(BaseModel):
    """One decision waiting on a human: a step of a task."""

    model_config = ConfigDict(json_schema_extra={"examples": [ITEM_EXAMPLE]})

    id: str = Field(description="`<namespace>/<task name>/<step id>`")
    task_id: str = Field(description="the task's id in `/agentic/tasks/{id}`")
    run_id: str = Field(description="the task's uid")
    org_id: uuid.UUID
    workflow: str = Field(description="the agent that proposed the plan")
    summary: str = Field(description="what the client asked for")
    requested_by: str
    step_id: str
    step_description: str
    kind: Literal["action", "input", "reply"] = Field(
        description="`action` (approve, edit or reject) or `input` (provide, select or "
        "reject), or `reply`: a draft reply to a conversation (approve, edit or reject at "
        "`/human-tasks/replies/{id}`)"
    )
    tool: str | None
    risk: str
    status: Literal["pending", "escalated", "outcome_unknown", "failed", "waiting_for_client"] = (
        Field(
            description="`pending` or `escalated` while the step waits for a decision; "
            "`waiting_for_client` once the experts approved a step that the task's initiating "
            "client must still confirm (it runs only then; the step's deadline covers the wait); "
            "`outcome_unknown` when its approved tool call may or may not have taken effect "
            "upstream and an expert must resolve it (`POST /human-tasks/{id}/resolve`); "
            "`failed` when its tool call failed, its task failed with it and its action is safe "
            "to retry (`POST /human-tasks/{id}/retry`; see the detail view for the reason)"
        )
    )
    deadline: datetime | None
    escalations: int
    # the two time-dependent fields come last: the index serialises the rest in advance
    near_deadline: bool = Field(description="due soon (or overdue, awaiting escalation)")
    age_seconds: int = Field(description="seconds since the task was created")


class HumanTaskPage(BaseModel):
    """A page of the review queue, deadline first."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"items": [ITEM_EXAMPLE], "total": 1, "pending_count": 1, "limit": 50, "offset": 0}
            ]
        }
    )

    items: list[HumanTask]
    total: int = Field(description="decisions matching the filters")
    pending_count: int = Field(
        description="every decision waiting in the caller's orgs (the navigation badge)"
    )
    limit: int
    offset: int


class ResumeBody(BaseModel):
    """The expert's answer to a waiting decision."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"action": "approve"},
                {"action": "reject", "feedback": "wrong month: use September"},
                {"action": "edit", "parameters": {"skus": 12}},
                {"action": "provide", "content": {"reply": "Dear customer, ..."}},
                {"action": "select", "selection": "refund"},
            ]
        },
    )

    action: Literal["approve", "reject", "provide", "edit", "select"]
    feedback: str | None = Field(default=None, max_length=4096)
    content: dict[str, JsonValue] | None = Field(default=None, description="for `provide`")
    parameters: dict[str, JsonValue] | None = Field(
        default=None, description="for `edit`: the amended tool parameters"
    )
    selection: str | None = Field(
        default=None, min_length=1, max_length=256, description="for `select`: one option"
    )
    step_hash: str | None = Field(
        default=None,
        pattern=r"^[0-9a-f]{64}$",
        description="SHA-256 of the step as the expert saw it; unset: the step as it is now",
    )

    @model_validator(mode="after")
    def _payload(self) -> Self:
        needs = {
            "reject": ("feedback", self.feedback),
            "provide": ("content", self.content),
            "edit": ("parameters", self.parameters),
            "select": ("selection", self.selection),
        }
        if self.action in needs:
            field, value = needs[self.action]
            if not value:
                raise ValueError(f"{self.action} needs {field}")
        return self


class ResumeRead(BaseModel):
    """What was recorded. Built only from the recorded decision, so a retry with the same
    `Idempotency-Key` answers the identical body."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "org-acme/task-7x2kq/write",
                    "task_id": "org-acme/task-7x2kq",
                    "step_id": "write",
                    "action": "approve",
                    "idempotency_key": "6c1f0f0e2b7a4c59",
                    "required_approvals": 1,
                    "decision": {
                        "verdict": "approve",
                        "by": "alice",
                        "at": "2026-01-01T12:30:00Z",
                        "idempotencyKey": "6c1f0f0e2b7a4c59",
                        "stepHash": 64 * "0",
                    },
                }
            ]
        }
    )

    id: str
    task_id: str
    step_id: str
    action: str
    idempotency_key: str
    required_approvals: int
    decision: dict[str, Any] = Field(
        description="the approval or decision recorded in the task's status for this request"
    )


# --- the detail view -----------------------------------------------------------------------

DETAIL_EXAMPLE: dict[str, Any] = {
    "id": "org-acme/task-7x2kq/write",
    "task_id": "org-acme/task-7x2kq",
    "run_id": "3d0f6a4e-5b1c-4f7e-9a0b-1c2d3e4f5a6b",
    "org_id": "6f1c2b9e-2d8a-4c55-9a57-0e4f3d2b1a90",
    "workflow": "acme-ecommerce",
    "prompt": "Reconcile all Amazon orders for October and update Shopify",
    "requested_by": "ops-lead",
    "step_id": "write",
    "risk": "high",
    "status": "pending",
    "phase": "PendingApproval",
    "deadline": "2026-01-01T13:00:00Z",
    "near_deadline": False,
    "escalations": 0,
    "archived": False,
    "plan": [
        {
            "id": "write",
            "description": "Take 3 units of HW-MUG-001 off the warehouse stock",
            "kind": "action",
            "tool": "shopify",
            "parameters": {
                "action": "adjustInventoryLevel",
                "params": {"sku": "HW-MUG-001", "available_adjustment": -3},
            },
            "risk": "high",
            "options": None,
            "step_hash": 64 * "0",
            "state": "Pending",
            "deadline": "2026-01-01T13:00:00Z",
            "escalations": 0,
            "required_approvals": 1,
            "approvals": [],
            "decision": None,
            "execution": None,
        }
    ],
    "conversation": {
        "id": "0b7e8f52-6d0e-4a57-8f0a-9a3c2d1e4b11",
        "subject": "Inventory is off",
        "messages": [
            {
                "id": 1,
                "role": "customer",
                "author": "[email]",
                "content": "Please call me at [phone]",
                "created_at": "2026-01-01T11:58:00Z",
            }
        ],
        "redactions": {"email": 1, "phone": 1},
    },
}


class StepExecution(BaseModel):
    """The agent's run of a step."""

    state: str
    attempt: int
    started_at: datetime | None
    finished_at: datetime | None
    result_summary: dict[str, Any] | None = Field(description="what the tool reported")
    error: str | None


class PlanStep(BaseModel):
    """One step of the plan with its decision and execution."""

    id: str
    description: str
    kind: str = Field(description="`action` or `input`")
    tool: str | None
    parameters: dict[str, Any]
    risk: str
    options: list[str] | None = Field(description="the choices of a select-type input step")
    step_hash: str = Field(description="what a decision on this version of the step carries")
    state: str | None = Field(description="the step's lifecycle state, as the operator wrote it")
    deadline: datetime | None
    escalations: int
    required_approvals: int
    approvals: list[dict[str, Any]]
    decision: dict[str, Any] | None
    execution: StepExecution | None
    resolution: dict[str, Any] | None = Field(
        default=None, description="an expert's resolution of an unknown outcome"
    )
    tool_definition: ToolDefinitionRead | None = Field(
        default=None,
        description="for a step of an org's MCP tool (`mcp_<server>`): the tool definition "
        "it pins, the text beside its hash",
    )
    # whether a failed run of this step may be retried
    retry_safe: bool = Field(
        default=False,
        description="the action catalog says the step's action is safe to run twice: when "
        "its tool call failed, an expert may retry it (`POST /human-tasks/{id}/retry`)",
    )


class ThreadMessage(BaseModel):
    """One message of the conversation, redacted."""

    id: int
    role: str
    author: str
    content: str
    created_at: datetime


class Thread(BaseModel):
    """The conversation the task came from, redacted (see `GET /human-tasks/{id}`)."""

    id: uuid.UUID
    subject: str
    messages: list[ThreadMessage]
    redactions: dict[str, int] = Field(description="how many of each kind were replaced")


# --- the revision loop: what a revised plan changed ---------------------------------------


class ValueChange(BaseModel):
    """A value before and after (null where one side has none)."""

    before: Any = None
    after: Any = None


class StepChangeRead(BaseModel):
    """A step of both plans that the revision changed."""

    step_id: str
    fields: dict[str, ValueChange] = Field(description="description, kind, tool or risk")
    parameters: dict[str, ValueChange]


class RevisionRead(BaseModel):
    """What this plan changed against the rejected plan it revises."""

    revision_of: str = Field(description="the rejected task, `<namespace>/<name>`")
    feedback: str | None = Field(description="the expert's feedback on the rejected plan")
    added: list[str] = Field(description="ids of the steps only this plan has")
    removed: list[str] = Field(description="ids of the steps only the rejected plan had")
    changed: list[StepChangeRead]


class ResolveChoice(BaseModel):
    """One of the two answers to an unknown outcome, and what it does."""

    outcome: Literal["applied", "not_applied"] = Field(
        description="the `outcome` to send to `POST /human-tasks/{id}/resolve`"
    )
    label: str = Field(description="what the choice is called in the workspace")
    effect: str = Field(description="what the platform does when an expert makes it")


class UnknownOutcomeRead(BaseModel):
    """What is known of a step whose approved tool call may or may not have taken effect."""

    request_sent_at: datetime | None = Field(
        description="when the proxy claimed the step and sent the request upstream (the "
        "ledger's claim; the execution's start when no claim is recorded)"
    )
    integration: str | None = Field(description="the upstream: the step's tool")
    operation: str | None = Field(description="the action called on it")
    idempotency_key: str = Field(description="the key the request carried upstream")
    attempt: int = Field(description="the execution attempt whose outcome is unknown")
    ledger: Literal["unknown", "in_flight", "stale", "done", "failed", "absent"] = Field(
        description="the proxy's claim for the step: `unknown` (kept for an expert), "
        "`in_flight` (the call still runs), `stale` (a claim older than the proxy's window: "
        "treated as unknown), `done`/`failed` (the call ended: resolving changes no ledger "
        "row), `absent` (nothing was claimed: nothing reached the upstream through the proxy)"
    )
    upstream_error: str | None = Field(
        description="the error code the upstream call ended with (from the audit log)"
    )
    read_back: Literal["inconclusive", "confirmed", "not_available", "not_recorded"] = Field(
        description="what the read-back found: `inconclusive` (the upstream was read and "
        "does not show the approved value), `confirmed` (it does), `not_available` (the "
        "action cannot be read back: an expert must check), `not_recorded` (no tool call "
        "of the step is in the audit log)"
    )
    read_back_detail: str = Field(description="the read-back's finding in words")
    choices: list[ResolveChoice]


class HumanTaskDetail(BaseModel):
    """Everything an expert needs to decide one step: the request prompt, the whole plan,
    the redacted conversation."""

    model_config = ConfigDict(json_schema_extra={"examples": [DETAIL_EXAMPLE]})

    id: str = Field(description="`<namespace>/<task name>/<step id>`")
    task_id: str
    run_id: str
    org_id: uuid.UUID
    workflow: str
    prompt: str = Field(description="what the client asked for (the task's description)")
    requested_by: str
    step_id: str
    risk: str
    status: Literal[
        "pending",
        "escalated",
        "outcome_unknown",
        "failed",
        "decided",
        "waiting_for_client",
        "expired",
        "waiting",
        "closed",
    ] = Field(
        description="`pending` or `escalated` while the step waits for a decision (as in the "
        "queue); `outcome_unknown` while its approved tool call may or may not have taken "
        "effect upstream (resolve it with `POST /human-tasks/{id}/resolve`); `failed` when "
        "its tool call failed (the plan step's `execution.error` says why; where its "
        "`retry_safe` is true, `POST /human-tasks/{id}/retry` runs it again); `decided` once "
        "it has its decision; `waiting_for_client` once approved while the task's initiating "
        "client has still to confirm it; `expired` when its time ran out; "
        "`waiting` while an earlier step is still open; `closed` when the task ended before "
        "the step was decided"
    )
    phase: str
    deadline: datetime | None
    near_deadline: bool
    escalations: int
    archived: bool = Field(description="the task resource is gone: served from the archive")
    plan: list[PlanStep]
    conversation: Thread | None = Field(
        description="the messages of the task's `conversationId` (the last 200), with e-mail "
        "addresses, phone numbers, card numbers and tokens redacted; null when the task "
        "names no conversation of its org"
    )
    revision: RevisionRead | None = Field(  # the revision loop
        default=None,
        description="for a revised plan (`spec.revisionOf`): the steps added, removed and "
        "changed against the rejected plan; null for an original plan",
    )
    unknown_outcome: UnknownOutcomeRead | None = Field(
        default=None,
        description="while `status` is `outcome_unknown`: what is known (request sent at, "
        "upstream, read-back, attempt) and the two choices; null otherwise",
    )


# --- bulk resume ---------------------------------------------------------------------------

HUMAN_TASK_ID = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[^/]{1,63}$"


class BulkResumeBody(BaseModel):
    """One decision for many waiting steps."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "ids": ["org-acme/task-7x2kq/write", "org-acme/task-9p3mz/read"],
                    "action": "approve",
                },
                {
                    "ids": ["org-acme/task-7x2kq/write"],
                    "action": "reject",
                    "feedback": "wrong month: use September",
                },
            ]
        },
    )

    ids: list[Annotated[str, Field(max_length=400, pattern=HUMAN_TASK_ID)]] = Field(
        min_length=1, max_length=200, description="human-task ids, each at most once"
    )
    action: Literal["approve", "reject"]
    feedback: str | None = Field(default=None, max_length=4096)

    @model_validator(mode="after")
    def _check(self) -> Self:
        if len(set(self.ids)) != len(self.ids):
            raise ValueError("each id at most once")
        if self.action == "reject" and not self.feedback:
            raise ValueError("reject needs feedback")
        return self


class BulkItem(BaseModel):
    """The outcome for one id."""

    id: str
    ok: bool
    code: str | None = Field(default=None, description="the error code when not ok")
    message: str | None = None


class BulkResumeRead(BaseModel):
    """Per-item results and the summary. Replayed identically for the same
    Idempotency-Key."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "results": [
                        {"id": "org-acme/task-7x2kq/write", "ok": True, "code": None},
                        {
                            "id": "org-acme/task-9p3mz/read",
                            "ok": False,
                            "code": "human_task_expired",
                            "message": "the decision deadline passed",
                        },
                    ],
                    "succeeded": 1,
                    "failed": 1,
                    "summary": "1 succeeded / 1 failed",
                    "failures": {"human_task_expired": ["org-acme/task-9p3mz/read"]},
                    "idempotency_key": "batch-0001",
                }
            ]
        }
    )

    results: list[BulkItem]
    succeeded: int
    failed: int
    summary: str = Field(description='"N succeeded / M failed"')
    failures: dict[str, list[str]] = Field(description="the failed ids grouped by error code")
    idempotency_key: str | None
