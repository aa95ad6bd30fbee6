"""`tools/call` of a tool of one of the org's own MCP servers (`mcp_<server>_<tool>`): run
by `mcp_servers.proxy.McpProxy`, always as an approved step named in the call's `_meta`
(`humanwork.io/task`, `humanwork.io/step`). Without an approval that matches, the answer is
a tool result with `isError` and the stable code `approval_required` (`details.reason`, and
`details.howToFile`: the step to file, its definition pinned); any other refusal (the
server changed the tool: `tool_definition_changed`; the step declares less than the tool's
risk: `step_risk_below_tool`) or failure answers `isError` with `{code, message, details}`.
Nothing reaches the server unless the approved step's call runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp import types
from pydantic import ValidationError

from platform_api.agent_api.identity import Agent
from platform_api.agent_api.schemas import ToolCallIn
from platform_api.agent_mcp.results import answer, invalid_meta
from platform_api.agent_mcp.view import KEY, STEP, TASK
from platform_api.errors import StepNotApproved
from platform_api.mcp_servers import catalog
from platform_api.mcp_servers.proxy import McpProxy


async def run(
    mcp: McpProxy,
    agent: Agent,
    target: tuple[str, str],
    arguments: dict[str, Any],
    meta: Mapping[str, Any],
) -> types.CallToolResult:
    """Run one call of the org's MCP tool `target` (server, tool)."""
    server, tool = target
    task, step = meta.get(TASK), meta.get(STEP)
    try:
        body = ToolCallIn.model_validate(
            {
                "action": tool,
                "params": arguments,
                "idempotencyKey": meta.get(KEY) or f"mcp/{task}/{step}",
                "task": task,
                "step": step,
            }
        )
    except ValidationError as exc:
        return invalid_meta(exc)

    async def refused(exc: StepNotApproved) -> tuple[str, Any]:
        filing = await catalog.how_to_file(mcp.tools.sessions, agent, server, tool, arguments)
        return f"{server}.{tool} runs only as an approved step: {exc.message}", filing

    return await answer(mcp.call(agent, server, tool, body), refused, f"{server}.{tool}")
