"""Request and response bodies of the reply endpoints."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from platform_api.human_tasks.schemas import Thread

AGENT_NAME = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
REPLY_ID = "5a0c4c1e-0d2b-4b8f-9a77-3c1e2d4f5a6b"
CONVERSATION_ID = "0b7e8f52-6d0e-4a57-8f0a-9a3c2d1e4b11"


class ReplyCreate(BaseModel):
    """Which agent drafts (the org's AgentInstance)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"agent": "agent"}]})

    agent: str = Field(
        min_length=1,
        max_length=253,
        pattern=AGENT_NAME,
        description="the name of the org's AgentInstance that drafts the reply",
    )


class ReplyRead(BaseModel):
    """A drafted reply and what became of it."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": REPLY_ID,
                    "queue_id": f"replies/{REPLY_ID}",
                    "conversation_id": CONVERSATION_ID,
                    "agent": "agent",
                    "message_id": 17,
                    "draft": "I am looking into it and will come back to you shortly.",
                    "confidence": 0.3,
                    "risk": "low",
                    "flag_for_review": True,
                    "state": "pending",
                    "threshold": 0.7,
                    "sent_text": None,
                    "sent_message_id": None,
                    "feedback": None,
                    "requested_by": "ops-lead",
                    "decided_by": None,
                    "created_at": "2026-01-01T12:00:00Z",
                }
            ]
        }
    )

    id: uuid.UUID
    queue_id: str = Field(description="the review queue's id of the draft: `replies/<id>`")
    conversation_id: uuid.UUID
    agent: str
    message_id: int = Field(description="the client message the draft answers")
    draft: str
    confidence: float = Field(description="the agent's confidence, 0 to 1")
    risk: str
    flag_for_review: bool
    state: Literal["pending", "sent", "rejected"] = Field(
        description="`sent` when it was confident enough (or an expert approved or edited "
        "it), `pending` while it waits in the review queue, `rejected` when discarded"
    )
    threshold: float | None = Field(
        default=None, description="the agent's confidence threshold when drafted, 0 to 1"
    )
    sent_text: str | None = Field(description="what was sent (the draft, or an expert's edit)")
    sent_message_id: int | None
    feedback: str | None
    requested_by: str
    decided_by: str | None
    created_at: datetime


class ReplyDetail(ReplyRead):
    """A draft with its client message and the conversation, redacted."""

    client_message: str
    conversation: Thread | None


class ReplyDecision(BaseModel):
    """An expert's answer to a draft waiting in the queue."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"action": "approve"},
                {"action": "edit", "text": "Your order 1042 arrives on Friday."},
                {"action": "reject", "feedback": "Never promise a delivery date."},
            ]
        },
    )

    action: Literal["approve", "edit", "reject"]
    text: str | None = Field(default=None, max_length=20000, description="for `edit`")
    feedback: str | None = Field(default=None, max_length=4096, description="for `reject`")

    @model_validator(mode="after")
    def _payload(self) -> Self:
        if self.action == "edit" and not (self.text or "").strip():
            raise ValueError("edit needs text")
        if self.action == "reject" and not (self.feedback or "").strip():
            raise ValueError("reject needs feedback")
        return self
