"""`tools/call`: one MCP call, run by the tool proxy (`agent_api.proxy.ToolProxy.call`), the
very code of `POST /v1/agent-api/tools/{tool}`: the same scope, permission and
`allowedActions` checks, the same approval check (the step's decision approves exactly this
tool, action and arguments: their hash), the same claim, ledger, idempotency and audit.

A read answers at once. A side-effecting call names its approved step in the call's
`_meta` (`humanwork.io/task`: the AgenticTask's name, `humanwork.io/step`: the step id;
`humanwork.io/idempotencyKey` optional, `mcp/<task>/<step>` by default: the proxy keys a
side effect by its step whatever key it is given, so a replay returns the first result and
runs nothing twice). Without an approval that matches, the answer is a tool result with
`isError` and the stable code `approval_required` (`details.reason`: the proxy's, e.g.
`no_step`, `not_approved`, `tool_call_mismatch`), with the step to file as an AgenticTask
and how to call again; nothing reaches the upstream. Any other refusal or failure answers
`isError` with the native endpoint's `{code, message, details}`.

A tool of one of the org's own MCP servers (`mcp_<server>_<tool>`) is run by
`mcp_calls` through `mcp_servers.proxy.McpProxy`: always as an approved step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp import types
from pydantic import ValidationError

from humanwork_core import catalog
from platform_api.agent_api.identity import Agent
from platform_api.agent_api.proxy import ToolProxy
from platform_api.agent_api.schemas import ToolCallIn
from platform_api.agent_mcp import mcp_calls
from platform_api.agent_mcp.results import answer, failure, invalid_meta
from platform_api.agent_mcp.view import KEY, STEP, TASK, resolve
from platform_api.errors import StepNotApproved
from platform_api.mcp_servers import definitions
from platform_api.mcp_servers.proxy import McpProxy


def _how_to_file(agent: Agent, action: catalog.Action, arguments: dict[str, Any]) -> dict[str, Any]:
    """The step an AgenticTask must carry for this call, and how to call again."""
    return {
        "kind": "AgenticTask",
        "apiVersion": "humanwork.io/v1alpha1",
        "namespace": agent.namespace,
        "agentRef": agent.name,
        "step": {
            "kind": "action",
            "tool": action.tool,
            "parameters": {"action": action.name, "params": arguments},
            "risk": action.min_risk.value,
        },
        "then": f"once an expert approved the step, call again with _meta {{{TASK!r}: "
        f"<task name>, {STEP!r}: <step id>}} and the same arguments",
    }


def request_of(
    action: catalog.Action, arguments: dict[str, Any], meta: Mapping[str, Any]
) -> ToolCallIn:
    """The proxy's request for an MCP call (ValidationError for a bad `_meta`)."""
    task, step, key = meta.get(TASK), meta.get(STEP), meta.get(KEY)
    if key is None and action.side_effect:
        key = f"mcp/{task}/{step}"
    return ToolCallIn.model_validate(
        {
            "action": action.name,
            "params": arguments,
            "idempotencyKey": key,
            "task": task,
            "step": step,
        }
    )


async def run(
    proxy: ToolProxy,
    agent: Agent,
    name: str,
    arguments: dict[str, Any],
    meta: Mapping[str, Any],
    mcp: McpProxy | None = None,
) -> types.CallToolResult:
    """Run one `tools/call` as the module docstring says."""
    action = resolve(name)
    org_tool = definitions.parse_view_name(name)
    if action is None and org_tool is not None and mcp is not None:
        return await mcp_calls.run(mcp, agent, org_tool, arguments, meta)
    if action is None:
        return failure("unknown_tool", f"no such tool {name[:100]!r}; tools/list lists them")
    try:
        body = request_of(action, arguments, meta)
    except ValidationError as exc:
        return invalid_meta(exc, "_meta ")

    async def refused(exc: StepNotApproved) -> tuple[str, dict[str, Any]]:
        message = (
            f"{action.tool}.{action.name} changes the upstream and runs only as an approved "
            f"step: {exc.message}"
        )
        return message, _how_to_file(agent, action, arguments)

    return await answer(proxy.call(agent, action.tool, body), refused, name)
