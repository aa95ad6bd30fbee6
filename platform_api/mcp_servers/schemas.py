"""Request and response bodies of `/orgs/{org_id}/mcp-servers` (a response never carries
the server's auth), and the definition a step of an org's MCP tool pins
(`ToolDefinitionRead`), which `pins.py` builds and the review detail shows."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from humanwork_core.risk import Risk
from platform_api.mcp_servers.definitions import SERVER_NAME_PATTERN

TOOL_NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_]{0,99}$"
"""The tool names the platform takes from a server (those of `ToolCallIn.action`)."""


class McpServerIn(BaseModel):
    """A remote MCP server to register for the org."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"name": "billing", "url": "https://mcp.example.com/mcp", "bearerToken": "..."}
            ]
        },
    )

    name: str = Field(
        pattern=SERVER_NAME_PATTERN,
        description="The server's name in the org: steps call its tools as tool "
        "`mcp_<name>`, which an AgentInstance must list in `enabledTools`.",
    )
    url: str = Field(min_length=1, max_length=2048, description="Its streamable-HTTP endpoint.")
    bearerToken: SecretStr | None = Field(
        default=None,
        max_length=4096,
        description="Sent as `Authorization: Bearer <token>`; encrypted, never returned.",
    )

    @field_validator("bearerToken")
    @classmethod
    def _visible_ascii(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not re.fullmatch(r"[\x21-\x7e]+", value.get_secret_value()):
            raise ValueError("a bearer token is visible ASCII characters only")
        return value


class RiskPut(BaseModel):
    """The risk the org gives one of the server's tools."""

    model_config = ConfigDict(extra="forbid")

    risk: Risk


class McpToolRead(BaseModel):
    """One discovered tool: its definition, its hash (what a step pins), the server's
    annotations (shown, never trusted) and its risk (`high` unless the admin set one)."""

    name: str
    description: str
    inputSchema: dict[str, Any]
    definitionHash: str
    annotations: dict[str, Any] | None
    risk: Risk
    riskSet: bool = Field(description="Whether the org's admin set the risk.")


class McpServerRead(BaseModel):
    """A registered server (never its auth) and its tools as last discovered."""

    name: str
    url: str
    stepTool: str = Field(description="The tool its steps name.")
    hasAuth: bool
    createdBy: str
    refreshedAt: datetime
    tools: list[McpToolRead]


class ToolDefinitionRead(BaseModel):
    """The definition of an org's MCP tool that a step pins, as its reviewer approves it."""

    pinned: str | None = Field(description="the hash the step pins (`parameters.definition`)")
    current: str | None = Field(
        description="the hash of the definition the platform's last discovery of the tool "
        "stored (null: the org has no such server or tool)"
    )
    definition: dict[str, Any] | None = Field(
        description="the pinned definition (`name`, `description`, `inputSchema`) when it is "
        "the stored one; null otherwise, and an approval is refused (409 "
        "`tool_definition_changed`): the step must be planned again"
    )
