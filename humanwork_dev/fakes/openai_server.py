"""A fake OpenAI-compatible chat-completions server: a real local HTTP server (uvicorn in a
background thread on a free 127.0.0.1 port) that answers `POST /v1/chat/completions`
from a script, non-streaming or streaming (Server-Sent Events `data:` chunks ending with
`data: [DONE]`), with tool calls, usage, and scripted errors (429 with Retry-After, 500)
for the retry tests. It records every request (the key it carried and the JSON body) so
that a test can check the model, key and messages the agent sent.

    with FakeOpenAI() as llm:
        llm.reply("Hello")                                  # next answer
        llm.tool_call("propose_plan", {"steps": [...]})     # the one after
        llm.fail(429, retry_after=0)                        # then an error
        ...  base URL: llm.url  (".../v1")
        llm.requests[0].body["model"], llm.requests[0].authorization

No pytest here, so the demo can use it too.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Self

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from humanwork_dev.fakes.server import BackgroundServer
from humanwork_dev.running import Running

DEFAULT_MODEL = "fake-gpt"


@dataclass(frozen=True)
class Recorded:
    """One request the fake received."""

    authorization: str | None
    body: dict[str, Any]

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))


@dataclass
class Scripted:
    """One scripted answer: an error (`status` >= 400) or a completion."""

    content: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    status: int = 200
    message: str = ""
    retry_after: float | None = None
    usage: dict[str, int] | None = None
    model: str | None = None
    finish_reason: str | None = None
    delay: float = 0.0


def _tool_call(index: int, name: str, arguments: dict[str, Any] | str) -> dict[str, Any]:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {
        "id": f"call_{index}",
        "type": "function",
        "function": {"name": name, "arguments": text},
    }


class FakeOpenAI(Running):
    """See the module's description."""

    def __init__(self, *, model: str = DEFAULT_MODEL, default: str = "OK") -> None:
        self.model = model
        self.default = default
        self._lock = threading.Lock()
        self._script: deque[Scripted] = deque()
        self._requests: list[Recorded] = []
        self._server = BackgroundServer(self._app())

    # --- lifecycle ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The base URL an OpenAI client is given: `http://127.0.0.1:PORT/v1`."""
        return f"{self._server.url}/v1"

    def start(self) -> Self:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    # --- the script --------------------------------------------------------------------------

    def reply(
        self,
        content: str,
        *,
        usage: dict[str, int] | None = None,
        model: str | None = None,
        delay: float = 0.0,
    ) -> None:
        """Queue a plain answer."""
        with self._lock:
            self._script.append(Scripted(content=content, usage=usage, model=model, delay=delay))

    def tool_call(self, name: str, arguments: dict[str, Any] | str, *, content: str = "") -> None:
        """Queue an answer that calls the function `name` with `arguments`."""
        with self._lock:
            index = len(self._requests) + len(self._script)
            self._script.append(
                Scripted(
                    content=content,
                    tool_calls=[_tool_call(index, name, arguments)],
                    finish_reason="tool_calls",
                )
            )

    def fail(
        self,
        status: int,
        *,
        times: int = 1,
        message: str = "scripted failure",
        retry_after: float | None = None,
    ) -> None:
        """Queue `times` error answers."""
        with self._lock:
            for _ in range(times):
                self._script.append(
                    Scripted(status=status, message=message, retry_after=retry_after)
                )

    @property
    def requests(self) -> list[Recorded]:
        with self._lock:
            return list(self._requests)

    @property
    def pending(self) -> int:
        """Scripted answers not used yet."""
        with self._lock:
            return len(self._script)

    # --- the server --------------------------------------------------------------------------

    def _next(self, body: dict[str, Any], authorization: str | None) -> Scripted:
        with self._lock:
            self._requests.append(Recorded(authorization, body))
            if self._script:
                return self._script.popleft()
        return Scripted(content=self.default)

    def _app(self) -> Starlette:
        async def completions(request: Request) -> Response:
            try:
                body = json.loads(await request.body())
            except ValueError:
                return JSONResponse({"error": {"message": "invalid JSON"}}, 400)
            answer = self._next(body, request.headers.get("authorization"))
            if answer.delay:
                await asyncio.sleep(answer.delay)
            if answer.status >= 400:
                headers = {}
                if answer.retry_after is not None:
                    headers["Retry-After"] = str(answer.retry_after)
                return JSONResponse(
                    {"error": {"message": answer.message, "type": "scripted", "code": None}},
                    answer.status,
                    headers=headers,
                )
            if body.get("stream"):
                return StreamingResponse(self._chunks(body, answer), media_type="text/event-stream")
            return JSONResponse(self._completion(body, answer))

        return Starlette(
            routes=[
                Route("/v1/chat/completions", completions, methods=["POST"]),
                Route("/chat/completions", completions, methods=["POST"]),
            ]
        )

    def _usage(self, body: dict[str, Any], answer: Scripted) -> dict[str, int]:
        if answer.usage is not None:
            return answer.usage
        prompt = sum(len(str(m.get("content") or "").split()) for m in body.get("messages", []))
        completion = len(answer.content.split()) + len(answer.tool_calls) * 10
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }

    def _completion(self, body: dict[str, Any], answer: Scripted) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": answer.content or None}
        if answer.tool_calls:
            message["tool_calls"] = answer.tool_calls
        return {
            "id": f"chatcmpl-{len(self._requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": answer.model or body.get("model") or self.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": answer.finish_reason or "stop",
                }
            ],
            "usage": self._usage(body, answer),
        }

    async def _chunks(self, body: dict[str, Any], answer: Scripted) -> AsyncIterator[bytes]:
        model = answer.model or body.get("model") or self.model
        base = {"id": "chatcmpl-stream", "object": "chat.completion.chunk", "model": model}

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            data = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            return f"data: {json.dumps(data)}\n\n".encode()

        yield chunk({"role": "assistant", "content": ""})
        words = answer.content.split(" ") if answer.content else []
        for position, word in enumerate(words):
            yield chunk({"content": word if position == 0 else " " + word})
        for index, call in enumerate(answer.tool_calls):
            arguments = call["function"]["arguments"]
            half = len(arguments) // 2
            yield chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": call["function"]["name"], "arguments": ""},
                        }
                    ]
                }
            )
            for part in (arguments[:half], arguments[half:]):
                yield chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]})
        yield chunk({}, answer.finish_reason or "stop")
        if (body.get("stream_options") or {}).get("include_usage"):
            usage: dict[str, Any] = {**base, "choices": [], "usage": self._usage(body, answer)}
            yield f"data: {json.dumps(usage)}\n\n".encode()
        yield b"data: [DONE]\n\n"
