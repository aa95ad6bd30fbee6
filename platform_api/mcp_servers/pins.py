"""Whether a step of an org's MCP tool pins the definition the platform discovered.

An expert approves a step against the tool as the platform knows it (the definition its
last `tools/list` stored, which the org's admin sees). The agent that wrote the plan chose
`parameters.definition`; an approval is refused unless that hash is the stored one, so an
approval never covers a definition nobody on the platform's side has seen. The proxy checks
the server's live definition again before the call (`proxy.py`).

`pinned_definition` gives the reviewer the text of the definition a step pins (name,
description, input schema), when it is the stored one: what the expert approves."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.mcp_servers import definitions
from platform_api.mcp_servers.errors import ToolDefinitionChanged
from platform_api.mcp_servers.repository import McpServerRepository
from platform_api.models import McpTool


@dataclass(frozen=True)
class PinnedDefinition:
    """A step's pin, the hash the platform's last discovery stored for the tool (None: no
    such server or tool) and the pinned definition when the two are the same (else None:
    an approval is refused)."""

    pinned: str | None
    current: str | None
    definition: dict[str, Any] | None


async def _stored(
    session: AsyncSession, org_id: uuid.UUID, server_name: str, parameters: Mapping[str, Any]
) -> McpTool | None:
    """The tool `parameters.action` of the org's server as its last discovery stored it."""
    action = parameters.get("action")
    repo = McpServerRepository(session)
    server = await repo.get(org_id, server_name)
    if server is None or not isinstance(action, str):
        return None
    return await repo.tool(server.id, action)


async def pinned_definition(
    session: AsyncSession, org_id: uuid.UUID, tool: str | None, parameters: Mapping[str, Any]
) -> PinnedDefinition | None:
    """What a step calling `tool` pins, for its reviewer; None for a tool that is not one
    of the org's MCP servers'."""
    server_name = definitions.server_of_step_tool(tool or "")
    if server_name is None:
        return None
    raw = parameters.get("definition")
    pinned = raw if isinstance(raw, str) else None
    stored = await _stored(session, org_id, server_name, parameters)
    current = stored.definition_hash if stored is not None else None
    known = stored.definition if stored is not None and pinned == current else None
    return PinnedDefinition(pinned, current, dict(known) if known is not None else None)


async def require_known_definition(
    session: AsyncSession, org_id: uuid.UUID, step_id: str, tool: str, parameters: Mapping[str, Any]
) -> None:
    """Raise `ToolDefinitionChanged` when `tool` names one of the org's MCP servers and the
    step's pinned definition is not the one stored for `parameters.action` (no such server
    or tool, no pin, or another hash); nothing for any other tool."""
    server_name = definitions.server_of_step_tool(tool)
    if server_name is None:
        return
    pinned = parameters.get("definition")
    stored = await _stored(session, org_id, server_name, parameters)
    current = stored.definition_hash if stored is not None else None
    if current is None or pinned != current:
        raise ToolDefinitionChanged(
            "the step does not pin the tool's definition the platform discovered: plan "
            "it again against the current definition",
            step_id=step_id,
            pinned=pinned if isinstance(pinned, str) else "",
            current=current or "",
        )
