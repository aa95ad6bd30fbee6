"""What `tools/list` shows one agent: the action catalog, cut to the tools the org enabled
(and, within each, the `allowedActions` of its config), cut again to the AgentInstance's
`spec.enabledTools`, exactly as the tool proxy checks them, so an agent is shown only what
the proxy would run for it. Without the `tools:execute` scope, nothing.

One MCP tool per action, named `<tool>_<action>` (`shopify_setInventoryLevel`); its input
schema is the catalog's, and its `_meta` says what the platform does with a call: the
action's minimum risk (`humanwork.io/risk`), whether it changes the upstream and so runs
only as an approved step (`humanwork.io/sideEffect`, `humanwork.io/approvalRequired`), and
the catalog's tool and action. The annotations mirror the catalog (`readOnlyHint` for a
read, `idempotentHint` where running it twice equals once); they inform a client, they
decide nothing here.

After them come the tools of the org's own MCP servers the AgentInstance lists
(`mcp_servers.catalog`: `mcp_<server>_<tool>`, each with the definition hash a step pins).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from mcp import types
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from humanwork_core import catalog
from platform_api.agent_api.identity import Agent
from platform_api.agent_api.proxy import TOOLS_SCOPE
from platform_api.mcp_servers import catalog as mcp_catalog
from platform_api.models import Org
from platform_api.tools import config as tool_config
from platform_api.tools import upstreams
from platform_api.tools.config import ToolConfig
from platform_api.tools.repository import ToolPermissionRepository

META = "humanwork.io/"
"""The prefix of the platform's keys in an MCP `_meta`."""
TASK, STEP, KEY = META + "task", META + "step", META + "idempotencyKey"
"""The keys of a `tools/call`'s `_meta` naming the approved step (and an optional key)."""


def mcp_name(action: catalog.Action) -> str:
    """The MCP name of a catalog action."""
    return f"{action.tool}_{action.name}"


_BY_NAME: Mapping[str, catalog.Action] = {
    mcp_name(action): action
    for tool in catalog.TOOLS.values()
    if tool.name in upstreams.known_tools()
    for action in tool.actions.values()
}


def resolve(name: str) -> catalog.Action | None:
    """The catalog action an MCP tool name stands for, or None."""
    return _BY_NAME.get(name)


def visible(agent: Agent, permitted: Mapping[str, ToolConfig]) -> list[catalog.Action]:
    """The actions `agent` may call, given the org's enabled tools and their configs."""
    if TOOLS_SCOPE not in agent.scopes:
        return []
    return [
        action
        for action in _BY_NAME.values()
        if action.tool in agent.enabled_tools
        and action.tool in permitted
        and permitted[action.tool].allows_action(action.name)
    ]


def describe(action: catalog.Action) -> types.Tool:
    """The MCP tool of one catalog action."""
    return types.Tool(
        name=mcp_name(action),
        title=f"{action.tool} {action.name}",
        description=action.description,
        inputSchema=action.json_schema(),
        annotations=types.ToolAnnotations(
            readOnlyHint=not action.side_effect,
            destructiveHint=action.side_effect,
            idempotentHint=action.retry_safe,
            openWorldHint=True,
        ),
        _meta={
            META + "tool": action.tool,
            META + "action": action.name,
            META + "risk": action.min_risk.value,
            META + "sideEffect": action.side_effect,
            META + "approvalRequired": action.side_effect,
        },
    )


async def permitted_tools(
    sessions: async_sessionmaker[AsyncSession], org_id: str
) -> dict[str, ToolConfig]:
    """The org's enabled tools and their configs; a config that no longer parses counts as
    not enabled (the proxy refuses it too), and an unregistered org has none."""
    org = uuid.UUID(org_id)
    async with sessions() as session, session.begin():
        if await session.get(Org, org) is None:
            return {}
        rows = await ToolPermissionRepository(session).list_for(org)
    found: dict[str, ToolConfig] = {}
    for row in rows:
        if not row.enabled:
            continue
        try:
            found[row.tool] = tool_config.parse(row.tool, dict(row.config or {}))
        except tool_config.InvalidToolConfig:
            continue
    return found


async def tools_for(sessions: async_sessionmaker[AsyncSession], agent: Agent) -> list[types.Tool]:
    """`tools/list` for `agent`: the catalog's actions, then the org's own MCP servers'
    tools (`mcp_servers.catalog`)."""
    native = [describe(a) for a in visible(agent, await permitted_tools(sessions, agent.org_id))]
    return native + await mcp_catalog.tools_for(sessions, agent)
