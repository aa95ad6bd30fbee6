"""A fault-injecting HTTP/1.1 proxy on loopback, put between the platform's tool proxy and
a fake upstream (its integration's `baseUrl` names the proxy) to misbehave on purpose:

- `reset`: forward the request, let the upstream answer (its side effect happened), then
  reset the client's connection (TCP RST) without a byte of the answer;
- `status`: answer `status` (with `Retry-After` if given) without reaching the upstream;
- `slow`: forward the request and hold the upstream's answer `seconds` before passing it on;
- `hold`: hold the request until `released` is set (`before`: not yet sent upstream;
  `after`: sent, answered, the answer held), so that a test can kill the caller at that
  point; with `drop`, a request held `before` is then dropped (its connection closed,
  nothing sent upstream), as a request lost with its dead sender.

Each rule applies to the next `times` requests whose path contains `path_contains`. Every
request is logged (method, path, what was done). Loopback only; no pytest here.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, Self
from urllib.parse import urlsplit

from humanwork_dev.running import Running


@dataclass
class Rule:
    """One misbehaviour (see the module docstring)."""

    kind: str
    path_contains: str = ""
    times: int = 1
    status: int = 503
    retry_after: float | None = None
    seconds: float = 0.0
    where: str = "before"
    drop: bool = False
    reached: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)


@dataclass(frozen=True)
class Passed:
    """One request the proxy saw and what it did with it (`forwarded` or a rule's kind)."""

    method: str
    path: str
    done: str


class FaultProxy(Running):
    """See the module docstring. Start with `start()` or as a context manager."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self._rules: list[Rule] = []
        self._log: list[Passed] = []
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Self:
        self._thread.start()
        self._server = self._run(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    def stop(self) -> None:
        with self._lock:
            for rule in self._rules:
                rule.released.set()
        if self._server is not None:
            self._server.close()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(30)

    # ------------------------------------------------------------------ rules and log

    def inject(self, kind: str, **options: Any) -> Rule:
        """Add a rule (`reset`, `status`, `slow`, `hold`); returns it (`reached`, `release`)."""
        if kind not in ("reset", "status", "slow", "hold"):
            raise ValueError(f"unknown fault {kind!r}")
        rule = Rule(kind, **options)
        with self._lock:
            self._rules.append(rule)
        return rule

    def clear(self) -> None:
        """Drop every rule (holding requests go on)."""
        with self._lock:
            for rule in self._rules:
                rule.released.set()
            self._rules.clear()

    @property
    def log(self) -> list[Passed]:
        with self._lock:
            return list(self._log)

    def _take(self, path: str) -> Rule | None:
        with self._lock:
            for rule in self._rules:
                if rule.path_contains in path and rule.times > 0:
                    rule.times -= 1
                    return rule
        return None

    # ------------------------------------------------------------------ serving

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request = await _read_message(reader)
                if request is None:
                    break
                if not await self._answer(request, writer):
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        writer.close()

    async def _answer(self, request: bytes, writer: asyncio.StreamWriter) -> bool:
        """Handle one request; False when the client's connection was reset."""
        method, path = _request_line(request)
        rule = self._take(path)
        with self._lock:
            self._log.append(Passed(method, path, rule.kind if rule else "forwarded"))
        if rule is not None and rule.kind == "status":
            writer.write(_canned(rule.status, rule.retry_after))
            await writer.drain()
            return True
        if rule is not None and rule.kind == "hold" and rule.where == "before":
            await self._hold(rule)
            if rule.drop:
                writer.transport.abort()
                return False
        answer = await self._forward(request)
        if rule is not None and rule.kind == "hold" and rule.where == "after":
            await self._hold(rule)
        if rule is not None and rule.kind == "slow":
            await asyncio.sleep(rule.seconds)
        if rule is not None and rule.kind == "reset":
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return False
        writer.write(answer)
        await writer.drain()
        return True

    async def _hold(self, rule: Rule) -> None:
        rule.reached.set()
        await asyncio.get_running_loop().run_in_executor(None, rule.released.wait)

    async def _forward(self, request: bytes) -> bytes:
        reader, writer = await asyncio.open_connection(*self.upstream)
        try:
            writer.write(request)
            await writer.drain()
            answer = await _read_message(reader)
        finally:
            writer.close()
        return answer or _canned(502, None)


def _request_line(message: bytes) -> tuple[str, str]:
    first = message.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
    return (first[0], first[1].split("?")[0]) if len(first) >= 2 else ("", "")


async def _read_message(reader: asyncio.StreamReader) -> bytes | None:
    """One HTTP/1.1 message (head and body, by Content-Length or chunked); None at EOF."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    headers = {
        k.strip().lower(): v.strip()
        for k, _, v in (
            line.decode("latin-1").partition(":") for line in head.split(b"\r\n")[1:] if line
        )
    }
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";")[0], 16)
            body += size_line + await reader.readexactly(size + 2)
            if size == 0:
                return head + body
    length = int(headers.get("content-length", "0") or 0)
    return head + (await reader.readexactly(length) if length else b"")


def _canned(status: int, retry_after: float | None) -> bytes:
    body = b'{"errors": "injected by the fault proxy"}'
    lines = [
        f"HTTP/1.1 {status} Injected",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
    ]
    if retry_after is not None:
        lines.append(f"Retry-After: {retry_after:g}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body
