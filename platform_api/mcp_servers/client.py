"""The platform's side of a remote MCP server: the URL rule (`check_server_url`) and the
SDK's streamable-HTTP client over the platform's `EgressClient` (every connection checked
against the egress rules at connect time, no cookie, no kept-alive connection).

`list_tools` discovers a server's tools; `Connection.call` re-lists them and checks the
tool's definition against the hash the approved step pinned before it sends `tools/call`,
in the same session, so a changed definition is refused and nothing of the call is sent.
An upstream failure says what it means for a side effect (`details.outcome`): `not_sent`
before `tools/call` went out, `unknown` after (a timeout or a broken connection), and an
error result of the tool is a definite answer (`refused`).
"""

from __future__ import annotations

import ipaddress
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client

from platform_api.errors import PlatformError
from platform_api.mcp_servers import definitions
from platform_api.mcp_servers.errors import (
    McpServerUnreachable,
    McpToolFailed,
    ToolDefinitionChanged,
)
from platform_api.tools.upstreams.base import OUTCOME_NOT_SENT, OUTCOME_REFUSED, OUTCOME_UNKNOWN
from platform_api.tools.upstreams.egress import AddressForbidden as _Forbidden
from platform_api.tools.upstreams.egress import (
    Egress,
    EgressClient,
    check_addresses,
    forbidden_reason,
    split_url,
)
from platform_api.tools.upstreams.errors import EgressRefused

KIND = "mcp"
FIELD = "url"


async def check_server_url(url: str, egress: Egress) -> str:
    """The server's URL (no trailing slash) when the platform may call it: http(s) with a
    host, no userinfo, fragment or query; https and public addresses only unless
    `HUMANWORK_UPSTREAM_ALLOWED_ENDPOINTS` allows the endpoint. `EgressRefused` (422) with
    its reason otherwise; no packet is sent to the server."""
    try:
        parts, host, port = split_url(url, KIND, FIELD)
    except EgressRefused as exc:
        exc.status_code = 422
        raise
    if not egress.policy.allows_endpoint(host, port):
        literal = _literal(host)
        if literal is not None and forbidden_reason(literal) is not None:
            raise _refused("address_forbidden", f"is a {forbidden_reason(literal)} address")
        if parts.scheme != "https":
            raise _refused("scheme_not_allowed", "must be https")
        addresses = [str(literal)] if literal is not None else await _resolve(host, port, egress)
        try:
            check_addresses(host, port, addresses, egress.policy)
        except _Forbidden as exc:
            raise _refused(
                "address_forbidden", f"resolves to a forbidden address ({exc})"
            ) from None
    return url.strip().rstrip("/")


def _literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


async def _resolve(host: str, port: int, egress: Egress) -> list[str]:
    try:
        return await egress.resolver(host, port)
    except OSError:
        return []  # left to the connect-time check


def _refused(reason: str, why: str) -> EgressRefused:
    refused = EgressRefused(KIND, FIELD, reason, f"the MCP server's url {why}")
    refused.status_code = 422
    return refused


def unreachable(exc: BaseException, outcome: str) -> McpServerUnreachable:
    """The error of a server that failed, without its text (it may echo a credential)."""
    return McpServerUnreachable(
        f"the MCP server failed ({type(exc).__name__})", details={"outcome": outcome}
    )


@dataclass
class Connection:
    """An initialised MCP session with one server."""

    session: ClientSession
    timeout: float
    sent: bool = False
    """Whether `tools/call` went out (a failure after it may have taken effect)."""

    async def tools(self) -> list[types.Tool]:
        """Every tool the server lists (all pages, at most `definitions.MAX_TOOLS`)."""
        found: list[types.Tool] = []
        cursor: str | None = None
        while len(found) < definitions.MAX_TOOLS:
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await self.session.list_tools(params=params)
            found.extend(page.tools)
            cursor = page.nextCursor
            if not cursor:
                break
        return found[: definitions.MAX_TOOLS]

    async def call(self, name: str, arguments: dict[str, Any], pinned: str) -> dict[str, Any]:
        """Check the tool's current definition against `pinned`, then call it once: its
        structured content (or its text content) as the result."""
        try:
            current = {t.name: t for t in await self.tools()}.get(name)
        except Exception as exc:
            raise unreachable(exc, OUTCOME_NOT_SENT) from None
        found = None if current is None else hash_of(current)
        if found != pinned:
            raise ToolDefinitionChanged(
                f"the server's definition of {name!r} is not the one the step was approved "
                "with; plan the step again against the current definition",
                tool=name,
                pinned=pinned,
                current=found or "",
                outcome=OUTCOME_NOT_SENT,
            )
        self.sent = True
        try:
            result = await self.session.call_tool(
                name, arguments, read_timeout_seconds=timedelta(seconds=self.timeout)
            )
        except Exception as exc:
            raise unreachable(exc, OUTCOME_UNKNOWN) from None
        return answer_of(name, result)


def hash_of(tool: types.Tool) -> str:
    """The definition hash of a listed tool."""
    return definitions.definition_hash(
        definitions.definition_of(tool.name, tool.description, tool.inputSchema)
    )


def answer_of(name: str, result: types.CallToolResult) -> dict[str, Any]:
    """The tool's answer as the proxy's result; `McpToolFailed` for an error result."""
    texts = [c.text for c in result.content if isinstance(c, types.TextContent)]
    if result.isError:
        raise McpToolFailed(
            f"the MCP tool {name!r} answered an error",
            details={"outcome": OUTCOME_REFUSED},
        )
    if result.structuredContent is not None:
        return {"structured": result.structuredContent, "text": texts}
    return {"text": texts}


@asynccontextmanager
async def connect(
    url: str, authorization: str | None, egress: Egress, seconds: float
) -> AsyncIterator[Connection]:
    """A session with the server at `url` (`authorization`: the `Authorization` header);
    `McpServerUnreachable` (outcome `not_sent`) when it cannot be opened."""
    headers = {"Authorization": authorization} if authorization else {}
    http = EgressClient(egress, timeout=seconds)
    http.headers.update(headers)
    opened: Connection | None = None
    try:
        async with (
            http,
            streamable_http_client(url, http_client=http) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            try:
                await session.initialize()
            except Exception as exc:
                raise unreachable(exc, OUTCOME_NOT_SENT) from None
            opened = Connection(session, seconds)
            yield opened
    except BaseExceptionGroup as group:
        sent = opened is not None and opened.sent
        raise _first_platform_error(group, OUTCOME_UNKNOWN if sent else OUTCOME_NOT_SENT) from None
    except PlatformError:
        raise
    except Exception as exc:  # the transport's own (a URL httpx will not send, ...)
        sent = opened is not None and opened.sent
        raise unreachable(exc, OUTCOME_UNKNOWN if sent else OUTCOME_NOT_SENT) from None


def _first_platform_error(group: BaseExceptionGroup[Any], outcome: str) -> Exception:
    """The platform error inside an anyio task group's exception group, else unreachable
    with `outcome`."""
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            return _first_platform_error(exc, outcome)
        if isinstance(exc, McpServerUnreachable | McpToolFailed | ToolDefinitionChanged):
            return exc
    return unreachable(group, outcome)
