"""Whether a step of an org's MCP tool pins the definition the platform discovered.

An expert approves a step against the tool as the platform knows it (the definition its
last `tools/list` stored, which the org's admin sees). The agent that wrote the plan chose
`parameters.definition`; an approval is refused unless that hash is the stored one, so an
approval never covers a definition nobody on the platform's side has seen. The proxy checks
the server's live definition again before the call (`proxy.py`).

`pinned_definitions` gives the reviewer the text of the definition each step of a plan pins
(name, description, input schema), when it is the stored one: what the expert approves. The
stored tools of all the plan's steps are read in one query, whatever the number of steps."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from humanwork_core.resources import Step
from platform_api.mcp_servers import definitions
from platform_api.mcp_servers.errors import ToolDefinitionChanged
from platform_api.mcp_servers.repository import McpServerRepository, ToolKey
from platform_api.mcp_servers.schemas import ToolDefinitionRead
from platform_api.models import McpTool


def _key(server_name: str, parameters: Mapping[str, Any]) -> ToolKey | None:
    """(server, tool) a step of `server_name`'s tool calls; None without an action."""
    action = parameters.get("action")
    return (server_name, action) if isinstance(action, str) else None


async def _stored(
    session: AsyncSession, org_id: uuid.UUID, keys: Iterable[ToolKey | None]
) -> dict[ToolKey, McpTool]:
    """The tools named by `keys` as the org's last discoveries stored them, in one query."""
    wanted = {key for key in keys if key is not None}
    if not wanted:
        return {}
    return await McpServerRepository(session).tools_named(org_id, wanted)


def _pin(parameters: Mapping[str, Any], stored: McpTool | None) -> ToolDefinitionRead:
    raw = parameters.get("definition")
    pinned = raw if isinstance(raw, str) else None
    current = stored.definition_hash if stored is not None else None
    known = stored.definition if stored is not None and pinned == current else None
    return ToolDefinitionRead(
        pinned=pinned, current=current, definition=dict(known) if known is not None else None
    )


async def pinned_definitions(
    session: AsyncSession, org_id: uuid.UUID, steps: Iterable[Step]
) -> dict[str, ToolDefinitionRead]:
    """What each step of an org's MCP tool pins, for its reviewer, by step id (the steps
    of any other tool are left out)."""
    keys: dict[str, tuple[Mapping[str, Any], ToolKey | None]] = {}
    for step in steps:
        server_name = definitions.server_of_step_tool(step.tool or "")
        if server_name is not None:
            keys[step.id] = (step.parameters, _key(server_name, step.parameters))
    stored = await _stored(session, org_id, (key for _, key in keys.values()))
    return {
        step_id: _pin(parameters, stored.get(key) if key is not None else None)
        for step_id, (parameters, key) in keys.items()
    }


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
    key = _key(server_name, parameters)
    stored = (await _stored(session, org_id, [key])).get(key) if key is not None else None
    current = stored.definition_hash if stored is not None else None
    if current is None or pinned != current:
        raise ToolDefinitionChanged(
            "the step does not pin the tool's definition the platform discovered: plan "
            "it again against the current definition",
            step_id=step_id,
            pinned=pinned if isinstance(pinned, str) else "",
            current=current or "",
        )
