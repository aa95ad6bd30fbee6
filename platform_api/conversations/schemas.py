"""Request and response bodies of the conversation endpoints."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

CONVERSATION_ID = "0b7e8f52-6d0e-4a57-8f0a-9a3c2d1e4b11"
ORG_ID = "6f1c2b9e-2d8a-4c55-9a57-0e4f3d2b1a90"

Role = Literal["customer", "agent", "expert", "system"]


class ConversationCreate(BaseModel):
    """A new conversation of the org; `id` may be chosen by the caller (the id a task's
    `conversationId` names), a random one otherwise."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"id": CONVERSATION_ID, "subject": "Order 1042 arrived damaged"}]
        },
    )

    id: uuid.UUID | None = None
    subject: str = Field(min_length=1, max_length=300)


class ConversationRead(BaseModel):
    """A conversation of an org."""

    model_config = ConfigDict(
        from_attributes=True,
        json_schema_extra={
            "examples": [
                {
                    "id": CONVERSATION_ID,
                    "org_id": ORG_ID,
                    "subject": "Order 1042 arrived damaged",
                    "created_at": "2026-01-01T12:00:00Z",
                }
            ]
        },
    )

    id: uuid.UUID
    org_id: uuid.UUID
    subject: str
    created_at: datetime


class MessageCreate(BaseModel):
    """One message appended to a conversation."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "role": "customer",
                    "author": "jane@example.com",
                    "content": "The vase arrived broken; can I get a refund?",
                }
            ]
        },
    )

    role: Role
    author: str = Field(min_length=1, max_length=200)
    content: str = Field(min_length=1, max_length=20000)


class MessageRead(BaseModel):
    """A stored message."""

    model_config = ConfigDict(
        from_attributes=True,
        json_schema_extra={
            "examples": [
                {
                    "id": 17,
                    "conversation_id": CONVERSATION_ID,
                    "role": "customer",
                    "author": "jane@example.com",
                    "content": "The vase arrived broken; can I get a refund?",
                    "created_at": "2026-01-01T12:00:00Z",
                }
            ]
        },
    )

    id: int
    conversation_id: uuid.UUID
    role: str
    author: str
    content: str
    created_at: datetime
