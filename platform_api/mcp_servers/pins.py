"""Whether a step of an org's MCP tool pins the definition the platform discovered.

An expert approves a step against the tool as the platform knows it (the definition its
last `tools/list` stored, which the org's admin sees). The agent that wrote the plan chose
`parameters.definition`; an approval is refused unless that hash is the stored one, so an
approval never covers a definition nobody on the platform's side has seen. The proxy checks
the server's live definition again before the call (`proxy.py`)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.mcp_servers import definitions
from platform_api.mcp_servers.errors import ToolDefinitionChanged
from platform_api.mcp_servers.repository import McpServerRepository


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
    action = parameters.get("action")
    repo = McpServerRepository(session)
    server = await repo.get(org_id, server_name)
    stored = None
    if server is not None and isinstance(action, str):
        stored = await repo.tool(server.id, action)
    current = stored.definition_hash if stored is not None else None
    if current is None or pinned != current:
        raise ToolDefinitionChanged(
            "the step does not pin the tool's definition the platform discovered: plan "
            "it again against the current definition",
            step_id=step_id,
            pinned=pinned if isinstance(pinned, str) else "",
            current=current or "",
        )
