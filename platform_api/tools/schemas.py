"""Request and response bodies of `/orgs/{org_id}/tool-permissions`."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

TOOL_NAME_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,99}$"


class ToolPermissionUpdate(BaseModel):
    """Enable or disable a tool for an org, with optional configuration."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"enabled": True, "config": {"max_refund": 100}}]},
    )

    enabled: bool
    config: dict[str, Any] = Field(default_factory=dict)


class ToolPermissionRead(BaseModel):
    """A tool's permission in an org."""

    model_config = ConfigDict(
        from_attributes=True,
        json_schema_extra={
            "examples": [
                {
                    "tool": "shopify",
                    "enabled": True,
                    "config": {"max_refund": 100},
                    "updated_at": "2026-01-01T12:00:00Z",
                    "updated_by": "admin",
                }
            ]
        },
    )

    tool: str
    enabled: bool
    config: dict[str, Any]
    updated_at: datetime
    updated_by: str
