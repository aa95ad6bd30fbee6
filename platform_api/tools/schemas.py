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
        json_schema_extra={
            "examples": [
                {
                    "enabled": True,
                    "config": {"allowedActions": ["listOrders", "getOrder"], "ratePerHour": 100},
                },
                {"enabled": True, "config": {"allowedDomains": ["docs.acme.example"]}},
            ]
        },
    )

    enabled: bool
    config: dict[str, Any] = Field(
        default_factory=dict,
        description="what the tool proxy enforces: `allowedActions` (the only actions the "
        "org's agents may call; absent: all), `ratePerHour` (calls per clock hour for the "
        "org, across replicas; absent: no limit), `allowedDomains` (`web` only: hosts "
        "`web.fetch` may read, `host` or `*.domain`). Any other key, an unknown action or a "
        "malformed domain answers 422 `invalid_tool_config`",
    )


class ToolPermissionRead(BaseModel):
    """A tool's permission in an org."""

    model_config = ConfigDict(
        from_attributes=True,
        json_schema_extra={
            "examples": [
                {
                    "tool": "shopify",
                    "enabled": True,
                    "config": {"allowedActions": ["listOrders"], "ratePerHour": 100},
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
