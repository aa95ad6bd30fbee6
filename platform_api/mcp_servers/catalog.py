"""An org's MCP tools in its agents' MCP view (`/v1/agent-api/mcp` `tools/list`): only the
org's own servers, only those whose step tool (`mcp_<server>`) the AgentInstance lists in
`enabledTools`, and nothing without the `tools:execute` scope. Another org's servers are
never read.

Each tool is named `mcp_<server>_<tool>` with the server's description and input schema;
its `_meta` says what the platform does with a call: its risk (the admin's, else `high`),
that it runs only as an approved step, the step tool and the definition hash the step must
pin (`humanwork.io/definitionHash`); the server's own annotations are passed on as
`humanwork.io/serverAnnotations` and decide nothing. The MCP annotations are the
platform's: never read-only.
"""

from __future__ import annotations

import uuid
from typing import Any

from mcp import types
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from platform_api.agent_api.identity import Agent
from platform_api.agent_api.proxy import TOOLS_SCOPE
from platform_api.mcp_servers import definitions
from platform_api.mcp_servers.repository import McpServerRepository
from platform_api.models import McpServer, McpTool

META = "humanwork.io/"


def describe(server: McpServer, tool: McpTool) -> types.Tool:
    """The agents' MCP tool of one of the org's server's tools."""
    return types.Tool(
        name=definitions.view_name(server.name, tool.name),
        title=f"{server.name} {tool.name}",
        description=str(tool.definition.get("description") or ""),
        inputSchema=dict(tool.definition.get("inputSchema") or {"type": "object"}),
        annotations=types.ToolAnnotations(
            readOnlyHint=False, destructiveHint=True, idempotentHint=False, openWorldHint=True
        ),
        _meta={
            META + "tool": definitions.step_tool(server.name),
            META + "action": tool.name,
            META + "risk": definitions.tool_risk(tool.risk).value,
            META + "sideEffect": True,
            META + "approvalRequired": True,
            META + "definitionHash": tool.definition_hash,
            META + "serverAnnotations": tool.annotations or {},
        },
    )


async def tools_for(sessions: async_sessionmaker[AsyncSession], agent: Agent) -> list[types.Tool]:
    """The org's MCP tools `agent` may call."""
    if TOOLS_SCOPE not in agent.scopes:
        return []
    found: list[types.Tool] = []
    async with sessions() as session, session.begin():
        repo = McpServerRepository(session)
        for server in await repo.list_for(uuid.UUID(agent.org_id)):
            if definitions.step_tool(server.name) not in agent.enabled_tools:
                continue
            found += [describe(server, tool) for tool in await repo.tools(server.id)]
    return found


async def how_to_file(
    sessions: async_sessionmaker[AsyncSession],
    agent: Agent,
    server: str,
    tool: str,
    arguments: dict[str, Any],
) -> dict[str, Any] | None:
    """The step an AgenticTask must carry to call `server`'s `tool` with `arguments`, its
    definition pinned as the platform holds it now (None for a tool the org lacks)."""
    async with sessions() as session, session.begin():
        repo = McpServerRepository(session)
        row = await repo.get(uuid.UUID(agent.org_id), server)
        listed = await repo.tool(row.id, tool) if row is not None else None
    if listed is None:
        return None
    return {
        "kind": "action",
        "tool": definitions.step_tool(server),
        "parameters": {
            "action": tool,
            "params": arguments,
            "definition": listed.definition_hash,
        },
        "risk": definitions.tool_risk(listed.risk).value,
    }
