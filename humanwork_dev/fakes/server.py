"""Serving a fake upstream for real: an ASGI app under uvicorn on a free 127.0.0.1 port,
in a background thread, plus what every fake shares (a request log, a side-effect log,
failure and delay injection).

No pytest here: the demo (`make up`) and the end-to-end tests use the same fakes.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any, NamedTuple, Self
from urllib.parse import parse_qsl

import uvicorn

from humanwork_dev.running import Running

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

START_TIMEOUT = 10.0


class BackgroundServer(Running):
    """An ASGI app served by uvicorn in a daemon thread.

    `port=0` picks a free port (the socket is bound before the thread starts, so
    `url` is known at once and no other process can take the port in between).
    Use as a context manager, or `start()` and `stop()`.
    """

    def __init__(self, app: ASGIApp, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.app = app
        self.host = host
        self.requested_port = port
        self._socket: socket.socket | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port: int | None = None

    @property
    def url(self) -> str:
        """`http://127.0.0.1:PORT`, once started."""
        if self.port is None:
            raise RuntimeError("the server is not running")
        return f"http://{self.host}:{self.port}"

    def start(self) -> None:
        """Bind, serve in a thread, and return once uvicorn accepts connections."""
        if self._thread is not None:
            raise RuntimeError("the server is already running")
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.requested_port))
        sock.set_inheritable(True)
        config = uvicorn.Config(
            self.app,
            log_level="warning",
            access_log=False,
            lifespan="off",
            interface="asgi3",
            timeout_graceful_shutdown=2,
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(
            target=server.run,
            kwargs={"sockets": [sock]},
            name=f"fake-upstream-{sock.getsockname()[1]}",
            daemon=True,
        )
        self._socket, self._server, self._thread = sock, server, thread
        thread.start()
        deadline = time.monotonic() + START_TIMEOUT
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the fake upstream server did not start")
            time.sleep(0.01)
        self.port = sock.getsockname()[1]

    def stop(self) -> None:
        """Ask uvicorn to exit, wait for the thread, release the port."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=START_TIMEOUT)
        if self._socket is not None:
            self._socket.close()
        self._socket = self._server = self._thread = None
        self.port = None


@dataclass(frozen=True)
class RecordedRequest:
    """One request a fake received (never its credentials)."""

    method: str
    path: str
    query: dict[str, str]
    status: int
    idempotency_key: str | None


class SideEffect(NamedTuple):
    """One change a fake made to its state: the action (named as the adapters name it),
    the request body that caused it, and the Idempotency-Key it carried."""

    action: str
    body: dict[str, Any]
    idempotency_key: str | None


@dataclass
class _Injected:
    status: int | None
    body: Any
    delay: float
    path_contains: str | None
    retry_after: float | None
    times: int
    after: int = 0


class FakeUpstream(Running):
    """What the fakes share. Subclasses build their Starlette app in `build_app`.

    - `requests`: every request received, in order (method, path, query, status,
      Idempotency-Key);
    - `side_effects`: every state change, in order;
    - `fail_next(status, ...)`: the next matching request(s) get this error without
      reaching the app (like a flaky load balancer);
    - `stall_next(seconds, ...)`: the next matching request(s) wait first.
    """

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._side_effects: list[SideEffect] = []
        self._injected: list[_Injected] = []
        self._server = BackgroundServer(self._asgi, host=host, port=port)
        self._paused_port: int | None = None
        self._app: ASGIApp = self.build_app()

    def build_app(self) -> ASGIApp:
        raise NotImplementedError

    # ---------------------------------------------------------------- lifecycle

    @property
    def url(self) -> str:
        """The base URL the fake serves on (once started)."""
        return self._server.url

    def start(self) -> Self:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    def refuse_connections(self) -> None:
        """Stop serving but keep the port: connections are refused until `serve_again`."""
        self._paused_port = self._server.port
        self._server.stop()

    def serve_again(self) -> None:
        """Serve again on the port `refuse_connections` left (state kept)."""
        self._server.requested_port = self._paused_port or 0
        self._server.start()

    # ---------------------------------------------------------------- logs

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of the requests received so far."""
        with self._lock:
            return list(self._requests)

    @property
    def side_effects(self) -> list[SideEffect]:
        """A snapshot of the side effects so far."""
        with self._lock:
            return list(self._side_effects)

    def requests_to(self, path_contains: str, method: str | None = None) -> list[RecordedRequest]:
        """The requests whose path contains `path_contains` (and of `method`, if given)."""
        return [
            r
            for r in self.requests
            if path_contains in r.path and (method is None or r.method == method.upper())
        ]

    def record_side_effect(
        self, action: str, body: dict[str, Any], idempotency_key: str | None
    ) -> None:
        with self._lock:
            self._side_effects.append(SideEffect(action, body, idempotency_key))

    # ---------------------------------------------------------------- injection

    def fail_next(
        self,
        status: int = 500,
        *,
        times: int = 1,
        body: Any = None,
        path_contains: str | None = None,
        retry_after: float | None = None,
        after: int = 0,
    ) -> None:
        """Answer the next `times` requests (whose path contains `path_contains`, if
        given; once `after` of them went through) with `status` and `body` (JSON; a
        generic error by default), and a Retry-After header if given."""
        with self._lock:
            self._injected.append(
                _Injected(status, body, 0.0, path_contains, retry_after, times, after)
            )

    def stall_next(
        self, seconds: float, *, times: int = 1, path_contains: str | None = None
    ) -> None:
        """Delay the next `times` matching requests by `seconds` before handling them."""
        with self._lock:
            self._injected.append(_Injected(None, None, seconds, path_contains, None, times))

    def _take_injection(self, path: str) -> _Injected | None:
        with self._lock:
            for item in self._injected:
                if item.path_contains is None or item.path_contains in path:
                    if item.after > 0:
                        item.after -= 1
                        return None
                    item.times -= 1
                    if item.times <= 0:
                        self._injected.remove(item)
                    return item
        return None

    # ---------------------------------------------------------------- ASGI

    async def _asgi(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        path: str = scope["path"]
        method: str = scope["method"]
        query = dict(parse_qsl(scope.get("query_string", b"").decode(), keep_blank_values=True))
        headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
        status_seen: list[int] = []

        async def recording_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status_seen.append(int(message["status"]))
            await send(message)

        injected = self._take_injection(path)
        try:
            if injected is not None and injected.delay:
                await asyncio.sleep(injected.delay)
            if injected is not None and injected.status is not None:
                body = injected.body
                if body is None:
                    body = {"errors": f"injected failure {injected.status}"}
                extra = []
                if injected.retry_after is not None:
                    extra.append((b"retry-after", f"{injected.retry_after:g}".encode()))
                await _send_json(recording_send, injected.status, body, extra)
            else:
                await self._app(scope, receive, recording_send)
        finally:
            with self._lock:
                self._requests.append(
                    RecordedRequest(
                        method=method,
                        path=path,
                        query=query,
                        status=status_seen[0] if status_seen else 0,
                        idempotency_key=headers.get("idempotency-key"),
                    )
                )


async def _send_json(
    send: Send, status: int, body: Any, extra_headers: list[tuple[bytes, bytes]]
) -> None:
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *extra_headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})
