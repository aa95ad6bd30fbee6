"""Request and response bodies of `/human-tasks`."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

ITEM_EXAMPLE: dict[str, Any] = {
    "id": "org-acme/task-7x2kq/write",
    "task_id": "org-acme/task-7x2kq",
    "run_id": "3d0f6a4e-5b1c-4f7e-9a0b-1c2d3e4f5a6b",
    "org_id": "6f1c2b9e-2d8a-4c55-9a57-0e4f3d2b1a90",
    "workflow": "acme-ecommerce",
    "summary": "Reconcile all Amazon orders for October and update Shopify",
    "requested_by": "ops-lead",
    "step_id": "write",
    "step_description": "Update inventory of 14 SKUs",
    "tool": "shopify_query",
    "risk": "high",
    "status": "pending",
    "deadline": "2026-01-01T13:00:00Z",
    "near_deadline": False,
    "escalations": 0,
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
    tool: str | None
    risk: str
    status: Literal["pending", "escalated"]
    deadline: datetime | None
    near_deadline: bool = Field(description="due soon (or overdue, awaiting escalation)")
    escalations: int
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
