"""An OpenAI-compatible chat-completions client over httpx (OpenAI, OpenRouter, vLLM, ...).

`POST {base_url}/chat/completions` with the agent's LLM key (the only secret it holds).
Retries with exponential backoff and jitter on 429 (honouring a short `Retry-After`), on
5xx and on connection errors and timeouts; other 4xx fail at once. Function calling:
`tools` in, :class:`ToolCall` (arguments parsed from their JSON) out. Streaming:
`stream: true`, Server-Sent Events `data:` chunks until `data: [DONE]`, with the usage of
the last chunk when the server sends it (`stream_options.include_usage`). Every answer
carries its usage and latency so that an `llm.called` event can report model, tokens,
cost estimate and latency.

:func:`llm_configured` says whether a base URL is usable at all; when it is not the agent
plans and answers offline (see :mod:`agent_image.planning` and :mod:`agent_image.responder`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

from agent_image.completions import (
    Completion,
    Delta,
    LLMError,
    Message,
    ToolCall,
    Usage,
    cost_estimate,
)
from humanwork_core import tracing

__all__ = [
    "Completion",
    "Delta",
    "LLMClient",
    "LLMError",
    "Message",
    "ToolCall",
    "Usage",
    "cost_estimate",
    "llm_configured",
]

LOG = logging.getLogger("humanwork.agent.llm")

RETRY_STATUSES = frozenset({408, 429})
"""Retried besides every 5xx."""
OFFLINE_DOMAINS = (".invalid", ".example", ".test.invalid")
"""Reserved names (RFC 2606 / 6761) that never resolve: a base URL on one of them means
"no language model here", so the agent works offline at once instead of failing calls."""


def llm_configured(base_url: str | None, api_key: str | None = None) -> bool:
    """Whether `base_url` names a reachable-looking LLM endpoint: not empty, http(s), not
    on a reserved never-resolving domain (`.invalid`, `.example`)."""
    if not base_url or not base_url.strip():
        return False
    parts = urlsplit(base_url.strip())
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("http", "https") or not host:
        return False
    return not any(host.endswith(d) or host == d.lstrip(".") for d in OFFLINE_DOMAINS)


def _parse_arguments(raw: str) -> dict[str, Any]:
    if not raw.strip():
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError as exc:
        raise LLMError(f"the model's tool arguments are not JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise LLMError("the model's tool arguments are not a JSON object")
    return parsed


def _tool_calls(raw: Any) -> tuple[ToolCall, ...]:
    calls: list[ToolCall] = []
    for index, item in enumerate(raw or ()):
        function = (item or {}).get("function") or {}
        arguments = function.get("arguments")
        text = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
        calls.append(
            ToolCall(
                id=str(item.get("id") or f"call_{index}"),
                name=str(function.get("name") or ""),
                arguments=_parse_arguments(text),
                raw_arguments=text,
            )
        )
    return tuple(calls)


def _error_message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:500] or response.reason_phrase
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    if isinstance(error, str):
        return error
    return response.text[:500]


class LLMClient:
    """Chat completions against one OpenAI-compatible endpoint."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        *,
        client: httpx.AsyncClient | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        max_retry_after: float = 30.0,
        observe: Callable[[str, float], None] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.observe = observe
        """Told (outcome, seconds) after each call: `ok` or the error's `kind` (the metrics)."""
        self._key = api_key or ""
        self._client = client or httpx.AsyncClient(timeout=timeout)
        self._owns_client = client is None
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.max_retry_after = max_retry_after

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        return headers

    @staticmethod
    def _body(
        messages: Sequence[Message],
        model: str,
        *,
        temperature: float | None,
        tools: Sequence[Mapping[str, Any]] | None,
        tool_choice: str | Mapping[str, Any] | None,
        response_format: Mapping[str, Any] | None,
        max_tokens: int | None,
        stream: bool,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": model, "messages": [dict(m) for m in messages]}
        if temperature is not None:
            body["temperature"] = temperature
        if tools:
            body["tools"] = [dict(t) for t in tools]
            if tool_choice is not None:
                body["tool_choice"] = tool_choice
        if response_format is not None:
            body["response_format"] = dict(response_format)
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body

    def _delay(self, attempt: int, response: httpx.Response | None) -> float:
        if response is not None and response.status_code == 429:
            header = response.headers.get("Retry-After", "")
            try:
                return min(max(float(header), 0.0), self.max_retry_after)
            except ValueError:
                pass
        base: float = min(self.backoff * float(2 ** (attempt - 1)), self.max_backoff)
        return base * (0.5 + random.random() / 2)  # jitter, not crypto

    async def _send(self, body: dict[str, Any], *, stream: bool) -> tuple[httpx.Response, int]:
        """:meth:`_attempt` in a GenAI span `chat <model>` (the model call)."""
        model = str(body.get("model") or "")
        attributes = {"gen_ai.operation.name": "chat", "gen_ai.request.model": model}
        with tracing.span(f"chat {model}", attributes, kind="client") as current:
            response, attempts = await self._attempt(body, stream=stream)
            tracing.annotate(current, {"http.response.status_code": response.status_code})
            return response, attempts

    async def _attempt(self, body: dict[str, Any], *, stream: bool) -> tuple[httpx.Response, int]:
        """The first successful response (opened for streaming when `stream`); retries
        what is worth retrying."""
        url = f"{self.base_url}/chat/completions"
        attempt = 0
        while True:
            attempt += 1
            response: httpx.Response | None = None
            try:
                request = self._client.build_request(
                    "POST", url, json=body, headers=self._headers(), timeout=self.timeout
                )
                response = await self._client.send(request, stream=stream)
            except (httpx.TransportError, httpx.TimeoutException) as exc:
                if attempt > self.max_retries:
                    raise LLMError(
                        f"the model endpoint is unreachable: {type(exc).__name__}: {exc}",
                        attempts=attempt,
                        kind="unavailable",
                    ) from None
                LOG.warning("LLM call failed (%s), retry %d", type(exc).__name__, attempt)
                await asyncio.sleep(self._delay(attempt, None))
                continue
            if response.status_code < 400:
                return response, attempt
            if stream:
                await response.aread()
                await response.aclose()
            retriable = response.status_code in RETRY_STATUSES or response.status_code >= 500
            if retriable and attempt <= self.max_retries:
                delay = self._delay(attempt, response)
                LOG.warning(
                    "LLM answered %d, retry %d in %.2fs", response.status_code, attempt, delay
                )
                await asyncio.sleep(delay)
                continue
            raise LLMError(
                f"the model endpoint answered {response.status_code}: {_error_message(response)}",
                status=response.status_code,
                attempts=attempt,
                kind="unavailable" if retriable else "refused",
            )

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        model: str,
        temperature: float | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        response_format: Mapping[str, Any] | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        """One chat completion (non-streaming)."""
        body = self._body(
            messages,
            model,
            temperature=temperature,
            tools=tools,
            tool_choice=tool_choice,
            response_format=response_format,
            max_tokens=max_tokens,
            stream=False,
        )
        started = time.perf_counter()
        try:
            response, attempts = await self._send(body, stream=False)
            completion = _completion(
                response, model, (time.perf_counter() - started) * 1000, attempts
            )
        except LLMError as exc:
            self._observed(exc.kind, started)
            raise
        self._observed("ok", started)
        return completion

    def _observed(self, outcome: str, started: float) -> None:
        """Tell `observe` how a call ended and how long it took (never raises into it)."""
        if self.observe is not None:
            try:
                self.observe(outcome, time.perf_counter() - started)
            except Exception:  # metrics never break a call
                LOG.exception("LLM call observer failed")

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        model: str,
        temperature: float | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_tokens: int | None = None,
    ) -> AsyncIterator[Delta | Completion]:
        """Stream a completion: :class:`Delta` pieces as they arrive, then the whole
        :class:`Completion` (content, tool calls, usage, latency) last. Retries happen only
        before the first byte."""
        body = self._body(
            messages,
            model,
            temperature=temperature,
            tools=tools,
            tool_choice=None,
            response_format=None,
            max_tokens=max_tokens,
            stream=True,
        )
        started = time.perf_counter()
        try:
            async for item in self._stream(body, model, started):
                yield item
        except LLMError as exc:
            self._observed(exc.kind, started)
            raise
        self._observed("ok", started)

    async def _stream(
        self, body: dict[str, Any], model: str, started: float
    ) -> AsyncIterator[Delta | Completion]:
        response, attempts = await self._send(body, stream=True)
        assembly = _StreamAssembly(model)
        try:
            async for chunk in _chunks(response):
                for text in assembly.feed(chunk):
                    yield Delta(text)
        except httpx.HTTPError as exc:
            raise LLMError(
                f"the model's stream broke off: {exc}", attempts=attempts, kind="unavailable"
            ) from None
        finally:
            await response.aclose()
        yield assembly.completion((time.perf_counter() - started) * 1000, attempts)


def _completion(response: httpx.Response, model: str, latency: float, attempts: int) -> Completion:
    """The completion of a non-streaming answer; LLMError (`malformed`) when it is none."""
    try:
        data = response.json()
        choice = data["choices"][0]
        message = choice.get("message") or {}
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        raise LLMError(
            "the model endpoint's answer is not a chat completion", attempts=attempts
        ) from None
    return Completion(
        content=str(message.get("content") or ""),
        model=str(data.get("model") or model),
        usage=Usage.from_json(data.get("usage")),
        tool_calls=_tool_calls(message.get("tool_calls")),
        finish_reason=choice.get("finish_reason"),
        latency_ms=latency,
        attempts=attempts,
    )


async def _chunks(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """The JSON chunks of a Server-Sent Events completion stream, until `[DONE]`."""
    async for line in response.aiter_lines():
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            break
        try:
            chunk = json.loads(payload)
        except ValueError:
            LOG.warning("skipping an unreadable stream chunk")
            continue
        yield chunk


@dataclass
class _StreamAssembly:
    """A streamed completion put together chunk by chunk: text, tool calls, usage."""

    model: str
    parts: list[str] = field(default_factory=list)
    calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    finish: str | None = None

    def feed(self, chunk: Mapping[str, Any]) -> list[str]:
        """Take one chunk in; the pieces of text it carries."""
        self.model = str(chunk.get("model") or self.model)
        if chunk.get("usage"):
            self.usage = Usage.from_json(chunk["usage"])
        texts: list[str] = []
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            self.finish = choice.get("finish_reason") or self.finish
            text = delta.get("content")
            if text:
                self.parts.append(text)
                texts.append(text)
            for call in delta.get("tool_calls") or ():
                slot = self.calls.setdefault(
                    int(call.get("index", 0)), {"id": "", "name": "", "arguments": ""}
                )
                slot["id"] = call.get("id") or slot["id"]
                function = call.get("function") or {}
                slot["name"] += function.get("name") or ""
                slot["arguments"] += function.get("arguments") or ""
        return texts

    def completion(self, latency_ms: float, attempts: int) -> Completion:
        """The whole completion, once the stream ended."""
        tool_calls = _tool_calls(
            [
                {"id": c["id"], "function": {"name": c["name"], "arguments": c["arguments"]}}
                for _, c in sorted(self.calls.items())
            ]
        )
        return Completion(
            content="".join(self.parts),
            model=self.model,
            usage=self.usage,
            tool_calls=tool_calls,
            finish_reason=self.finish,
            latency_ms=latency_ms,
            attempts=attempts,
        )
