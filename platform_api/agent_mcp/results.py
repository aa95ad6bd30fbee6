"""The answer of one MCP `tools/call`, whichever proxy runs it (the catalog's tools through
`agent_api.proxy.ToolProxy`, an org's MCP server's through `mcp_servers.proxy.McpProxy`):
the result as structured content, or `isError` with the native endpoint's
`{code, message, details}`; a call without a matching approved step answers
`approval_required` with the step to file."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from mcp import types
from pydantic import BaseModel, ValidationError

from platform_api.errors import PlatformError, StepNotApproved

log = logging.getLogger(__name__)

APPROVAL_REQUIRED = "approval_required"


def failure(
    code: str, message: str, details: Mapping[str, Any] | None = None
) -> types.CallToolResult:
    """A refused or failed call: `isError`, the error's JSON body as structured content."""
    body = {"code": code, "message": message, "details": dict(details or {})}
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(body))],
        structuredContent=body,
        isError=True,
    )


def invalid_meta(exc: ValidationError, prefix: str = "") -> types.CallToolResult:
    """The answer to a call whose `_meta` (or arguments) the request model refused."""
    first = exc.errors()[0]
    field = ".".join(str(p) for p in first["loc"])
    return failure("invalid_meta", f"{prefix}{field}: {first['msg']}", {"field": field})


async def answer(
    call: Awaitable[BaseModel],
    refused: Callable[[StepNotApproved], Awaitable[tuple[str, Any]]],
    what: str,
) -> types.CallToolResult:
    """Run `call` and answer it: `refused` gives the message and the step to file of a call
    without a matching approval; `what` names the call in the log of an unexpected failure."""
    try:
        out = await call
    except StepNotApproved as exc:
        message, filing = await refused(exc)
        return failure(APPROVAL_REQUIRED, message, {**exc.public_details(), "howToFile": filing})
    except PlatformError as exc:
        return failure(exc.code, exc.message, exc.public_details())
    except Exception:
        log.exception("MCP tool call %s failed", what)
        return failure("internal_error", "the call failed inside the platform")
    result = out.model_dump()
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(result))],
        structuredContent=result,
        isError=False,
    )
