"""Response bodies of `GET /orgs/{org_id}/corrections`."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Kind = Literal["reply_edit", "reply_rejected", "step_edit", "step_rejected"]


class CorrectionRead(BaseModel):
    """One expert correction."""

    model_config = ConfigDict(
        from_attributes=True,
        json_schema_extra={
            "examples": [
                {
                    "id": "2b1f0d4e-8c3a-4e59-9f1a-7d6c5b4a3e21",
                    "org_id": "6f1c2b9e-2d8a-4c55-9a57-0e4f3d2b1a90",
                    "kind": "reply_edit",
                    "message": "Where is my order 1042?",
                    "draft": "I am looking into it and will come back to you shortly.",
                    "corrected": "Order 1042 left our warehouse yesterday; it arrives Friday.",
                    "note": None,
                    "source": "reply:5a0c4c1e-0d2b-4b8f-9a77-3c1e2d4f5a6b",
                    "conversation_id": "0b7e8f52-6d0e-4a57-8f0a-9a3c2d1e4b11",
                    "by": "expert-1",
                    "created_at": "2026-01-01T12:00:00Z",
                }
            ]
        },
    )

    id: uuid.UUID
    org_id: uuid.UUID
    kind: Kind = Field(
        description="`reply_edit` (the expert sent other text), `reply_rejected` (the "
        "draft was discarded; `corrected` holds the feedback), `step_edit` (a step's "
        "parameters were amended; JSON before and after) or `step_rejected` (feedback)"
    )
    message: str = Field(description="the client message, or the request of the plan")
    draft: str | None = Field(description="what the agent proposed")
    corrected: str = Field(description="what the expert said instead")
    note: str | None
    source: str = Field(description="`reply:<id>` or `step:<namespace>/<task>/<step>`")
    conversation_id: uuid.UUID | None
    by: str
    created_at: datetime


class CorrectionPage(BaseModel):
    """A page of an org's corrections, newest first."""

    items: list[CorrectionRead]
    total: int
    limit: int
    offset: int
