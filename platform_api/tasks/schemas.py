"""Request and response bodies of `/agentic/tasks`.

The plan (steps, policy) uses the resource contract's own models, so what the API accepts
is exactly what the AgenticTask schema accepts; a task's `spec` and `status` are shown as
the API server stores them (camelCase). A task's `id` is `<namespace>/<name>`; its `uid`
(`metadata.uid`) addresses it too. Seed 000's view sits beside them: `seed_status` and
`steps` (each step's `order` and status; see `seedview`).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from humanwork_core.resources import Step, TaskPhase, TaskPolicy
from platform_api.tasks.seedview import SeedStep, SeedTaskStatus

PLAN_EXAMPLE: dict[str, Any] = {
    "orgId": "6f1c2b9e-2d8a-4c55-9a57-0e4f3d2b1a90",
    "agentRef": "acme-ecommerce",
    "conversationId": "0b7e8f52-6d0e-4a57-8f0a-9a3c2d1e4b11",
    "description": "Reconcile all Amazon orders for October and update Shopify",
    "steps": [
        {
            "id": "read",
            "description": "Fetch October orders",
            "kind": "action",
            "tool": "amazon",
            "parameters": {
                "action": "listOrders",
                "params": {
                    "CreatedAfter": "2026-10-01T00:00:00Z",
                    "CreatedBefore": "2026-11-01T00:00:00Z",
                },
            },
            "risk": "low",
        },
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
        },
    ],
    "policy": {"decisionDeadlineSeconds": 3600},
}

TASK_EXAMPLE: dict[str, Any] = {
    "id": "org-acme/task-7x2kq",
    "uid": "3d0f6a4e-5b1c-4f7e-9a0b-1c2d3e4f5a6b",
    "namespace": "org-acme",
    "name": "task-7x2kq",
    "org_id": "6f1c2b9e-2d8a-4c55-9a57-0e4f3d2b1a90",
    "agent": "acme-ecommerce",
    "description": "Reconcile all Amazon orders for October and update Shopify",
    "requested_by": "ops-lead",
    "phase": "PendingApproval",
    "seed_status": "pending_approval",
    "current_step": "read",
    "highest_pending_risk": "high",
    "next_deadline": "2026-01-01T13:00:00Z",
    "created_at": "2026-01-01T12:00:00Z",
    "resource_version": "4711",
    "archived": False,
}


class PhaseFilter(StrEnum):
    """The `status` filter of the task list: a task phase in snake_case."""

    PENDING_APPROVAL = "pending_approval"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    REJECTED = "rejected"
    FAILED = "failed"
    CANCELLED = "cancelled"
    EXPIRED = "expired"

    @property
    def phase(self) -> TaskPhase:
        return {
            PhaseFilter.PENDING_APPROVAL: TaskPhase.PENDING_APPROVAL,
            PhaseFilter.IN_PROGRESS: TaskPhase.IN_PROGRESS,
            PhaseFilter.COMPLETED: TaskPhase.COMPLETED,
            PhaseFilter.REJECTED: TaskPhase.REJECTED,
            PhaseFilter.FAILED: TaskPhase.FAILED,
            PhaseFilter.CANCELLED: TaskPhase.CANCELLED,
            PhaseFilter.EXPIRED: TaskPhase.EXPIRED,
        }[self]


class TaskCreate(BaseModel):
    """A plan to put before the experts; the caller becomes its requester."""

    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        json_schema_extra={"examples": [PLAN_EXAMPLE]},
    )

    org_id: uuid.UUID = Field(description="the org (the task goes into its namespace)")
    agent_ref: str = Field(
        min_length=1,
        max_length=57,
        pattern=r"^[a-z]([-a-z0-9]*[a-z0-9])?$",
        description="name of the AgentInstance, in the org's namespace, that runs the plan",
    )
    conversation_id: uuid.UUID | None = None
    description: str = Field(min_length=1, max_length=4096)
    steps: list[Step] = Field(min_length=1, max_length=50)
    policy: TaskPolicy | None = None


class TaskSummary(BaseModel):
    """One task in a list."""

    model_config = ConfigDict(json_schema_extra={"examples": [TASK_EXAMPLE]})

    id: str = Field(description="`<namespace>/<name>`, the task's id in every URL")
    uid: str = Field(
        description="the resource's `metadata.uid` (a UUID): seed 000's task id, accepted "
        "in the URLs too (`/agentic/tasks/{uid}`)"
    )
    namespace: str
    name: str
    org_id: uuid.UUID
    agent: str
    description: str
    requested_by: str = Field(
        description="who asked for the task, as the platform vouches for it: the caller of "
        "POST /agentic/tasks or of the plan request the agent created it for; `agent:<name>` "
        "for a task an agent created on its own (its `spec.requestedBy`)"
    )
    phase: TaskPhase = Field(
        description="the phase the operator recorded, or the one derived from the status "
        "before the operator's first pass"
    )
    seed_status: SeedTaskStatus = Field(
        description="the phase in seed 000's words: `pending_approval`, `approved` (in "
        "progress, the step ahead approved and not started yet), `in_progress`, "
        "`completed`, `rejected`, `failed`, and beyond the seed `cancelled`, `expired`"
    )
    current_step: str | None
    highest_pending_risk: str | None
    next_deadline: datetime | None
    created_at: datetime | None
    resource_version: str = Field(description="empty for an archived task")
    archived: bool = Field(
        default=False,
        description="the resource is gone (removed after its TTL once finished): the task "
        "is served from the platform's archive, as it was when it finished",
    )


class TaskRead(TaskSummary):
    """A task with its full plan (`spec`) and status, as the API server stores them."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    **TASK_EXAMPLE,
                    "spec": {**PLAN_EXAMPLE, "requestedBy": "ops-lead"},
                    "status": {"phase": "PendingApproval", "currentStep": "read"},
                    "steps": [
                        {"step_id": "read", "order": 1, "status": "pending", "state": "Pending"},
                        {"step_id": "write", "order": 2, "status": "pending", "state": "Pending"},
                    ],
                }
            ]
        }
    )

    spec: dict[str, Any]
    status: dict[str, Any]
    step_hashes: dict[str, str] = Field(
        description="step id -> the hash a decision on that version of the step carries"
    )
    steps: list[SeedStep] = Field(
        description="seed 000's view of each step, in plan order: its `order` (from 1), "
        "its seed status and the project's state"
    )


class TaskPage(BaseModel):
    """A page of tasks, newest first."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"items": [TASK_EXAMPLE], "total": 1, "limit": 50, "offset": 0}]
        }
    )

    items: list[TaskSummary]
    total: int = Field(description="how many tasks match the filters")
    limit: int
    offset: int


class _DecisionBody(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)

    step_hash: str | None = Field(
        default=None,
        pattern=r"^[0-9a-f]{64}$",
        description="SHA-256 of the step as the expert saw it (`step_hashes` of GET the "
        "task); unset: the step as it is now",
    )


class ApproveBody(_DecisionBody):
    """An approval, with an optional note."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"feedback": "looks right", "stepHash": 64 * "0"}]}
    )

    feedback: str | None = Field(default=None, max_length=4096)


class RejectBody(_DecisionBody):
    """A rejection: it halts the task, and the feedback goes back to the agent."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"feedback": "wrong month: use September"}]}
    )

    feedback: str = Field(min_length=1, max_length=4096)


class DecisionRead(BaseModel):
    """The outcome of an approval or rejection, with the task as written."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "step_id": "read",
                    "verdict": "approve",
                    "decided": True,
                    "approvals": 1,
                    "required_approvals": 1,
                    "replayed": False,
                    "idempotency_key": "6c1f0f0e2b7a4c59",
                    "task": {**TASK_EXAMPLE, "spec": {}, "status": {}, "steps": []},
                }
            ]
        }
    )

    step_id: str
    verdict: str
    decided: bool = Field(
        description="whether the step now has its decision (false while a risk that needs "
        "several approvers waits for more)"
    )
    approvals: int
    required_approvals: int
    replayed: bool = Field(description="a retry with the same Idempotency-Key: nothing written")
    idempotency_key: str
    task: TaskRead
