"""Request and response bodies of the conversation endpoints: conversations, their
messages (who wrote each: `author_kind`), pages of both, a client's message and an
expert's internal note."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from platform_api.models import Message

CONVERSATION_ID = "0b7e8f52-6d0e-4a57-8f0a-9a3c2d1e4b11"
ORG_ID = "6f1c2b9e-2d8a-4c55-9a57-0e4f3d2b1a90"
USER_ID = "3d5e2a10-8c1b-4f7e-9a2d-6b4c3e1f0a77"

Role = Literal["customer", "agent", "expert", "system"]
AuthorKind = Literal["client", "expert", "agent", "system"]

AUTHOR_KIND: dict[str, AuthorKind] = {
    "customer": "client",
    "expert": "expert",
    "agent": "agent",
    "system": "system",
}
"""The stored `Message.role` onto who wrote the message, as every reader sees it."""

CONTENT = Field(min_length=1, max_length=20000, description="the text (1 to 20,000 characters)")


class ConversationCreate(BaseModel):
    """A new conversation of the org; `id` may be chosen by the caller (the id a task's
    `conversationId` names), a random one otherwise. `message`, when given, is stored as
    the caller's first message."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"id": CONVERSATION_ID, "subject": "Order 1042 arrived damaged"}]
        },
    )

    id: uuid.UUID | None = None
    subject: str = Field(min_length=1, max_length=300)
    message: str | None = Field(
        default=None,
        min_length=1,
        max_length=20000,
        description="the caller's first message (a client's is dispatched like any other)",
    )


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
                    "created_by": USER_ID,
                    "last_message_at": "2026-01-01T12:05:00Z",
                }
            ]
        },
    )

    id: uuid.UUID
    org_id: uuid.UUID
    subject: str
    created_at: datetime
    created_by: uuid.UUID | None = Field(
        default=None, description="the user who started it (null when an admin created it)"
    )
    last_message_at: datetime | None = Field(
        default=None, description="the newest message the caller may see (null: none)"
    )


class ConversationPage(BaseModel):
    """One page of conversations, newest activity first."""

    items: list[ConversationRead]
    next_cursor: str | None = Field(
        description="send it back as `cursor` for the next page (null: the last page)"
    )


class MessageView(BaseModel):
    """A message as the conversation endpoints answer it."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": 17,
                    "conversation_id": CONVERSATION_ID,
                    "author_kind": "client",
                    "author": "jane",
                    "content": "The vase arrived broken; can I get a refund?",
                    "created_at": "2026-01-01T12:00:00Z",
                    "internal": False,
                    "meta": None,
                }
            ]
        },
    )

    id: int
    conversation_id: uuid.UUID
    author_kind: AuthorKind = Field(description="who wrote it: client, expert, agent or system")
    author: str
    content: str
    created_at: datetime
    internal: bool = Field(description="an expert's internal note (never shown to a client)")
    meta: dict[str, Any] | None = Field(
        default=None, description="what a system message reports: `{event, task, step?, ...}`"
    )

    @classmethod
    def of(cls, message: Message) -> MessageView:
        return cls(
            id=message.id,
            conversation_id=message.conversation_id,
            author_kind=AUTHOR_KIND.get(message.role, "system"),
            author=message.author,
            content=message.content,
            created_at=message.created_at,
            internal=bool(message.internal),
            meta=message.meta,
        )


class ConversationThread(BaseModel):
    """A conversation with one page of its messages, oldest first."""

    conversation: ConversationRead
    messages: list[MessageView]
    next_after: int | None = Field(
        description="send it back as `after` for the next messages (null: none yet)"
    )


class ContentCreate(BaseModel):
    """A client's message or an expert's note: the text only. Who wrote it, its kind and
    its meta are the platform's (any other field is refused)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"content": "Can you refund order 1042?"}]},
    )

    content: str = CONTENT


class MessageCreate(BaseModel):
    """One message appended to a conversation by an operator (`agents.manage`)."""

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
