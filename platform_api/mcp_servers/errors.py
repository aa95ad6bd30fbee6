"""The errors of an org's MCP servers, each with its stable code (members of the
platform's one error family)."""

from __future__ import annotations

from platform_api.errors import PlatformError
from platform_api.tools.upstreams.errors import UpstreamError


class McpServerExists(PlatformError):
    """The org already registered a server of this name."""

    code = "mcp_server_exists"
    status_code = 409


class McpServerUnreachable(UpstreamError):
    """The server could not be reached or did not answer MCP (refresh, or the definition
    check before a call; at registration answered 422: the given URL or token does not
    serve MCP); nothing was stored or run."""

    code = "mcp_server_unreachable"
    status_code = 502


class McpToolFailed(UpstreamError):
    """The server answered the tool call with an error result (`isError`)."""

    code = "mcp_tool_error"
    status_code = 502


class ToolDefinitionChanged(PlatformError):
    """The server's current definition of the tool is not the one the approved step pinned
    (tool poisoning or an update): the call is refused, nothing reaches the server, and the
    step needs a plan against the new definition and a new approval."""

    code = "tool_definition_changed"
    status_code = 409


class RiskBelowTool(PlatformError):
    """The approved step declares less than the risk the org's admin gives the tool."""

    code = "step_risk_below_tool"
    status_code = 403
