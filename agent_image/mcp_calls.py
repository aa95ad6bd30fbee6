"""The agent's tool calls over the platform's MCP endpoint (`POST /v1/agent-api/mcp`), the
`mcp` tool path (`AgentSettings.tool_path`): the JSON-RPC message of one `tools/call` and
how its answer reads. Pure: `PlatformClient` sends the message.

The endpoint is stateless MCP over streamable HTTP with JSON answers, so one POST carries
one `tools/call` and needs no `initialize` before it. The tool is named `<tool>_<action>`;
the arguments are the action's parameters; the call's `_meta` names the approved step
(`humanwork.io/task`, `humanwork.io/step`) and the idempotency key
(`humanwork.io/idempotencyKey`), the very key the native path sends. A successful call's
`structuredContent` is the native endpoint's answer (`{tool, action, result, replayed,
sideEffecting, receipt}`); a refused or failed one has `isError` and the native error body
`{code, message, details}` (`approval_required` where the native endpoint answers
`step_not_approved`), so the executor judges both paths by the same codes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

META = "humanwork.io/"
TASK, STEP, KEY = META + "task", META + "step", META + "idempotencyKey"
ACCEPT = "application/json, text/event-stream"
"""What a streamable-HTTP MCP client must accept (the endpoint answers JSON)."""


class McpAnswerError(Exception):
    """A `tools/call` that did not give the tool's answer: its error's code, message and
    details (the tool's own error, a JSON-RPC error, or an answer of another shape)."""

    def __init__(self, code: str, message: str, details: Mapping[str, Any] | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.details: dict[str, Any] = dict(details or {})


def tool_name(tool: str, action: str) -> str:
    """The MCP name of a catalog action (`shopify_setInventoryLevel`)."""
    return f"{tool}_{action}"


def request(
    tool: str,
    action: str,
    params: Mapping[str, Any],
    idempotency_key: str,
    task: str | None,
    step: str | None,
    request_id: int = 1,
) -> dict[str, Any]:
    """The JSON-RPC message of one `tools/call` of `tool`.`action`."""
    meta: dict[str, Any] = {KEY: idempotency_key}
    if task is not None:
        meta[TASK] = task
    if step is not None:
        meta[STEP] = step
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": tool_name(tool, action), "arguments": dict(params), "_meta": meta},
    }


def answer(body: Any) -> dict[str, Any]:
    """The tool's answer in a `tools/call` response (the native endpoint's shape), or
    McpAnswerError with the refusal's code (`mcp_error` for a JSON-RPC error,
    `malformed_answer` for anything else)."""
    if not isinstance(body, Mapping):
        raise McpAnswerError("malformed_answer", "the MCP answer is not a JSON object")
    error = body.get("error")
    if isinstance(error, Mapping):
        message = str(error.get("message") or "the MCP request failed")
        raise McpAnswerError("mcp_error", message, {"rpcCode": str(error.get("code"))})
    result = body.get("result")
    if not isinstance(result, Mapping):
        raise McpAnswerError("malformed_answer", "the MCP answer carries no result")
    content = result.get("structuredContent")
    if not isinstance(content, Mapping):
        raise McpAnswerError("malformed_answer", "the MCP answer carries no structured result")
    if result.get("isError"):
        details = content.get("details")
        raise McpAnswerError(
            str(content.get("code") or "tool_error"),
            str(content.get("message") or "the tool call failed"),
            details if isinstance(details, Mapping) else None,
        )
    return dict(content)
