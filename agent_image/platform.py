"""`PlatformClient`: the agent's calls to the platform's agent API (seed 002 section 4.3).

    GET  /v1/agent-api/conversations/{id}/messages   conversation history
    GET  /v1/agent-api/context?query=...             the org's knowledge, ranked
    POST /v1/agent-api/tools/{tool}                  a tool call through the proxy
    POST /v1/agent-api/mcp                           the same, as an MCP `tools/call`
    POST /v1/agent-api/token/refresh                 ask for an early token rotation

Authenticated by the agent token, read from its mounted Secret file on every call (the
operator rotates it). Connection errors and 502/503/504 answers are retried with backoff,
except the proxy's report of an upstream's failure (`details.upstreamStatus`: the upstream
answered; sending again would only ask it again);
a tool call is retried with the SAME idempotency key, which the proxy deduplicates, so a
side effect happens once however often the request is sent. Refusals raise
:class:`ToolCallError` (tool calls) or :class:`PlatformError` (the rest), carrying the
HTTP status and the platform's JSON error `{code, message, details}`. Each tool call is
told to `observe_tool` (tool, outcome, seconds: the agent's metrics) once it has ended.
Tool calls take the path `AgentSettings.tool_path` names: the proxy's native endpoint, or
its MCP endpoint (`agent_image.mcp_calls`: the same key, the same answer, a tool's error
raised as the same `ToolCallError`, with the exchange's status 200).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote

import httpx

from agent_image import mcp_calls
from agent_image.settings import AgentSettings
from humanwork_core import tracing

LOG = logging.getLogger("humanwork.agent.platform")

RETRY_STATUSES = frozenset({502, 503, 504})
API = "/v1/agent-api"
ToolObserver = Callable[[str, str, float], None]
"""Told (tool, outcome, seconds) after each tool call (`agent_image.metrics`)."""


class PlatformError(Exception):
    """The platform refused or failed a call; `status` 0 when it was unreachable."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details: dict[str, Any] = dict(details or {})

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": self.details}


class ToolCallError(PlatformError):
    """The tool proxy refused or failed a tool call (for example `not_approved`,
    `tool_not_permitted`, `upstream_error`)."""


def _error(response: httpx.Response, kind: type[PlatformError]) -> PlatformError:
    code, message, details = "http_error", response.reason_phrase or "error", {}
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        code = str(body.get("code") or code)
        message = str(body.get("message") or body.get("detail") or message)
        raw = body.get("details")
        details = raw if isinstance(raw, dict) else {}
    return kind(response.status_code, code, message, details)


def tool_outcome(exc: PlatformError) -> str:
    """How a refused tool call ended, one of `agent_image.metrics.TOOL_OUTCOMES`."""
    if exc.code == "tool_call_outcome_unknown":
        return "unknown"
    if exc.code == "tool_call_in_progress":
        return "busy"
    if "upstreamStatus" in exc.details:
        return "upstream_error"
    if exc.status == 0 or exc.status >= 500 or exc.status == 429:
        return "unavailable"
    return "refused"


def _json(response: httpx.Response, kind: type[PlatformError]) -> Any:
    """The JSON of a successful answer; `malformed_answer` when it is not JSON."""
    if not response.content:
        return {}
    try:
        return response.json()
    except ValueError:
        raise kind(
            response.status_code, "malformed_answer", "the platform's answer is not JSON"
        ) from None


class PlatformClient:
    """The agent's client of the platform's agent API."""

    def __init__(
        self,
        settings: AgentSettings,
        client: httpx.AsyncClient,
        *,
        attempts: int = 4,
        backoff: float = 0.25,
        timeout: float = 30.0,
    ) -> None:
        self.settings = settings
        self.base_url = settings.platform_url.rstrip("/")
        self.client = client
        self.attempts = max(1, attempts)
        self.backoff = backoff
        self.timeout = timeout
        self.observe_tool: ToolObserver | None = None

    def token(self) -> str:
        """The agent token, as the mounted Secret holds it now."""
        return self.settings.token_file.read_text(encoding="utf-8").strip()

    async def _call(
        self,
        method: str,
        path: str,
        *,
        kind: type[PlatformError] = PlatformError,
        params: Mapping[str, str] | None = None,
        json_body: Any = None,
        headers: Mapping[str, str] | None = None,
        attempts: int | None = None,
    ) -> Any:
        tries = attempts or self.attempts
        last: PlatformError | None = None
        for attempt in range(1, tries + 1):
            try:
                auth = {
                    "Authorization": f"Bearer {self.token()}",
                    **(headers or {}),
                    **tracing.headers(),  # the current span (a tool call's), to the platform
                }
            except OSError as exc:
                raise kind(0, "token_unavailable", f"cannot read the agent token: {exc}") from None
            try:
                response = await self.client.request(
                    method,
                    self.base_url + path,
                    params=params,
                    json=json_body,
                    headers=auth,
                    timeout=self.timeout,
                )
            except httpx.HTTPError as exc:
                last = kind(0, "platform_unreachable", f"{type(exc).__name__}: {exc}")
            else:
                if response.status_code < 400:
                    return _json(response, kind)
                error = _error(response, kind)
                if response.status_code not in RETRY_STATUSES or "upstreamStatus" in error.details:
                    raise error
                last = error
            if attempt < tries:
                LOG.warning("platform %s %s failed (%s), retry %d", method, path, last, attempt)
                await asyncio.sleep(self.backoff * (2 ** (attempt - 1)))
        assert last is not None
        raise last

    async def messages(
        self, conversation_id: str, *, attempts: int | None = None
    ) -> list[dict[str, Any]]:
        """The messages of a conversation of the agent's org, oldest first."""
        data = await self._call(
            "GET",
            f"{API}/conversations/{quote(conversation_id, safe='')}/messages",
            attempts=attempts,
        )
        items = data.get("messages", data.get("items", [])) if isinstance(data, dict) else data
        return [dict(m) for m in items or [] if isinstance(m, dict)]

    async def context(
        self, query: str, *, limit: int | None = None, attempts: int | None = None
    ) -> list[dict[str, Any]]:
        """The org's knowledge most relevant to `query`, best first."""
        params = {"query": query}
        if limit is not None:
            params["limit"] = str(limit)
        data = await self._call("GET", f"{API}/context", params=params, attempts=attempts)
        items = data.get("results", data.get("items", [])) if isinstance(data, dict) else data
        return [dict(m) for m in items or [] if isinstance(m, dict)]

    async def call_tool(
        self,
        tool: str,
        action: str,
        params: Mapping[str, Any],
        idempotency_key: str,
        task: str | None,
        step: str | None,
        *,
        attempts: int | None = None,
    ) -> dict[str, Any]:
        """Run `tool`.`action` through the platform's proxy; the proxy's answer
        (`{tool, action, result, replayed, sideEffecting}`).

        For a side-effecting action `task` and `step` name the AgenticTask and its approved
        step; the proxy checks the decision. The same `idempotency_key` is sent on every
        retry, so a repeated call returns the first result."""
        body = {
            "action": action,
            "params": dict(params),
            "idempotencyKey": idempotency_key,
            "task": task,
            "step": step,
        }
        started = time.perf_counter()
        try:
            if self.settings.tool_path == "mcp":
                data = await self._call_mcp(
                    tool, action, params, idempotency_key, task, step, attempts
                )
            else:
                data = await self._call(
                    "POST",
                    f"{API}/tools/{quote(tool, safe='')}",
                    kind=ToolCallError,
                    json_body=body,
                    headers={"Idempotency-Key": idempotency_key},
                    attempts=attempts,
                )
        except PlatformError as exc:
            self._observed(tool, tool_outcome(exc), started)
            raise
        self._observed(tool, "ok", started)
        return dict(data) if isinstance(data, dict) else {"result": data}

    async def _call_mcp(
        self,
        tool: str,
        action: str,
        params: Mapping[str, Any],
        idempotency_key: str,
        task: str | None,
        step: str | None,
        attempts: int | None,
    ) -> dict[str, Any]:
        """One tool call as an MCP `tools/call` (`mcp_calls`): the tool's answer, or
        ToolCallError with the tool's error code and details."""
        data = await self._call(
            "POST",
            f"{API}/mcp",
            kind=ToolCallError,
            json_body=mcp_calls.request(tool, action, params, idempotency_key, task, step),
            headers={"Accept": mcp_calls.ACCEPT, "Idempotency-Key": idempotency_key},
            attempts=attempts,
        )
        try:
            return mcp_calls.answer(data)
        except mcp_calls.McpAnswerError as exc:
            raise ToolCallError(200, exc.code, exc.message, exc.details) from None

    def _observed(self, tool: str, outcome: str, started: float) -> None:
        """Tell `observe_tool` how a call ended (never raises into the call)."""
        if self.observe_tool is not None:
            try:
                self.observe_tool(tool, outcome, time.perf_counter() - started)
            except Exception:
                LOG.exception("tool call observer failed")

    async def refresh_token(self) -> dict[str, Any]:
        """Ask the operator, through the platform, to rotate the token now."""
        data = await self._call("POST", f"{API}/token/refresh", attempts=1)
        return dict(data) if isinstance(data, dict) else {}
