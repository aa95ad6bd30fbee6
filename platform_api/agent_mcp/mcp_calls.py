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

import json
import logging
from collections.abc import Mapping
from typing import Any

from mcp import types
from pydantic import ValidationError

from platform_api.agent_api.identity import Agent
from platform_api.agent_api.schemas import ToolCallIn
from platform_api.agent_mcp.view import KEY, STEP, TASK
from platform_api.errors import PlatformError, StepNotApproved
from platform_api.mcp_servers import catalog
from platform_api.mcp_servers.proxy import McpProxy

log = logging.getLogger(__name__)

APPROVAL_REQUIRED = "approval_required"


def _failure(
    code: str, message: str, details: Mapping[str, Any] | None = None
) -> types.CallToolResult:
    body = {"code": code, "message": message, "details": dict(details or {})}
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(body))],
        structuredContent=body,
        isError=True,
    )


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
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        return _failure("invalid_meta", f"{field}: {first['msg']}", {"field": field})
    try:
        out = await mcp.call(agent, server, tool, body)
    except StepNotApproved as refused:
        filing = await catalog.how_to_file(mcp.tools.sessions, agent, server, tool, arguments)
        return _failure(
            APPROVAL_REQUIRED,
            f"{server}.{tool} runs only as an approved step: {refused.message}",
            {**refused.public_details(), "howToFile": filing},
        )
    except PlatformError as exc:
        return _failure(exc.code, exc.message, exc.public_details())
    except Exception:
        log.exception("MCP call of the org's tool %s.%s failed", server, tool)
        return _failure("internal_error", "the call failed inside the platform")
    result = out.model_dump()
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(result))],
        structuredContent=result,
        isError=False,
    )
