"""`POST /v1/agent-api/mcp`: the MCP endpoint for agents (streamable HTTP, stateless, JSON
answers).

The agent's token is checked first, by the very dependency of the other agent-API endpoints
(`agent_api.auth.CurrentAgent`): a missing, malformed, expired, rotated-out, revoked or
deactivated org's token answers 401 `unauthenticated` before any MCP message is read, so
nothing is listed or called. Each POST then runs one short-lived MCP server (the official
SDK's low-level `Server` under its `StreamableHTTPSessionManager`, stateless: every request
stands alone and carries the token again) whose handlers are bound to that agent:
`tools/list` (`view`) and `tools/call` (`calls`). The body is bounded
(`MAX_BODY_BYTES`, larger answers 413).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from platform_api.agent_api.auth import CurrentAgent
from platform_api.agent_api.identity import Agent
from platform_api.agent_api.proxy import ToolProxy, Tools
from platform_api.agent_mcp import calls, view
from platform_api.db import Sessions
from platform_api.errors import error_responses
from platform_api.mcp_servers.proxy import McpProxy
from platform_api.state import AppSettings
from platform_api.tools.upstreams.egress import EgressDep

router = APIRouter(prefix="/v1/agent-api", tags=["agent api"])

SERVER_NAME = "humanwork"
MAX_BODY_BYTES = 1024 * 1024
"""The largest MCP request body (a JSON-RPC message) read."""


def build_server(
    agent: Agent, sessions: async_sessionmaker[AsyncSession], tools: ToolProxy, mcp: McpProxy
) -> Server[Any, Any]:
    """An MCP server whose `tools/list` and `tools/call` answer for `agent` only."""
    server: Server[Any, Any] = Server(SERVER_NAME)

    @server.list_tools()  # type: ignore[no-untyped-call,untyped-decorator]
    async def list_tools() -> list[types.Tool]:
        return await view.tools_for(sessions, agent)

    async def call_tool(request: types.CallToolRequest) -> types.ServerResult:
        meta = request.params.meta
        extra: dict[str, Any] = dict(meta.model_extra or {}) if meta is not None else {}
        result = await calls.run(
            tools,
            agent,
            request.params.name,
            dict(request.params.arguments or {}),
            extra,
            mcp,
        )
        return types.ServerResult(result)

    # registered directly: the SDK's decorator would re-list the tools on every call and
    # answer an exception with its text; the proxy validates and answers with codes
    server.request_handlers[types.CallToolRequest] = call_tool
    return server


class McpExchange(Response):
    """The answer of one MCP request: the SDK's transport writes it to the connection."""

    def __init__(self, server: Server[Any, Any]) -> None:
        super().__init__()
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        manager = StreamableHTTPSessionManager(
            app=self.server,
            json_response=True,
            stateless=True,
            max_request_body_size=MAX_BODY_BYTES,
        )
        async with manager.run():
            await manager.handle_request(scope, receive, send)


@router.post(
    "/mcp",
    summary="The MCP endpoint for agents",
    description="Agent token (scope `tools:execute` to see or call any tool). MCP over "
    "streamable HTTP, stateless, JSON answers (`Accept: application/json, "
    "text/event-stream`); the body is one JSON-RPC message. `tools/list`: the catalog's "
    "actions this agent may call (the org enabled the tool and allows the action, the "
    "AgentInstance lists the tool), named `<tool>_<action>`, each with its input schema and "
    "`_meta` `humanwork.io/risk`, `humanwork.io/sideEffect`. `tools/call` runs through the "
    "tool proxy (`POST /v1/agent-api/tools/{tool}`, same checks, ledger and audit): a read "
    "answers at once; a side-effecting call needs `_meta` `humanwork.io/task` and "
    "`humanwork.io/step` naming the step an expert approved with exactly these arguments, "
    "else the tool result has `isError` and `structuredContent.code` `approval_required` "
    "(with `details.howToFile`) and nothing reaches the upstream. A token that is not the "
    "agent's current one answers 401 `unauthenticated` before any MCP message is read.",
    responses=error_responses(401, 503),
    response_class=Response,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {
                    "schema": {"type": "object", "description": "a JSON-RPC 2.0 message"}
                }
            },
        }
    },
)
async def mcp_endpoint(
    agent: CurrentAgent,
    sessions: Sessions,
    tools: Tools,
    egress: EgressDep,
    settings: AppSettings,
) -> Response:
    """One MCP message, answered for the authenticated agent."""
    mcp = McpProxy(tools, egress, settings.upstream_timeout_seconds)
    return McpExchange(build_server(agent, sessions, tools, mcp))
