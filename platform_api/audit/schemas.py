"""Response bodies of `/audit`."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

_ENTRY_EXAMPLE: dict[str, Any] = {
    "id": 42,
    "org_id": "6f1c2b9e-2d8a-4c55-9a57-0e4f3d2b1a90",
    "seq": 7,
    "at": "2026-01-01T12:00:00.000000Z",
    "actor": "alice",
    "action": "tool_permission.updated",
    "target": "tool:shopify",
    "outcome": "success",
    "details": {"enabled": True},
    "prev_hash": "5d41402abc4b2a76b9719d911017c592" * 2,
    "hash": "7d793037a0760186574b0282f2f435e7" * 2,
}


class AuditEntry(BaseModel):
    """One audit row, with its chain links."""

    model_config = ConfigDict(
        from_attributes=True, json_schema_extra={"examples": [_ENTRY_EXAMPLE]}
    )

    id: int
    org_id: uuid.UUID | None
    seq: int
    at: datetime
    actor: str
    action: str
    target: str
    outcome: str
    details: dict[str, Any]
    prev_hash: str
    hash: str


class AuditPage(BaseModel):
    """One page of audit rows, newest first."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "items": [_ENTRY_EXAMPLE],
                    "total": 1,
                    "limit": 50,
                    "offset": 0,
                    "next_offset": None,
                }
            ]
        }
    )

    items: list[AuditEntry]
    total: int
    limit: int
    offset: int
    next_offset: int | None
