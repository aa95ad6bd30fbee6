"""Test helpers of the notifications (issue 14, item 3): a webhook receiver on loopback
and a reader of the live event stream."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    """One request the receiver got, and the status it answered."""

    headers: dict[str, str]
    body: bytes
    status: int

    @property
    def event(self) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(self.body)
        return found


@dataclass
class Receiver:
    """A webhook receiver on 127.0.0.1: answers 500 to the first `fail_first` requests,
    204 to the others; records everything."""

    fail_first: int = 1
    received: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with receiver.lock:
                    status = 500 if len(receiver.received) < receiver.fail_first else 204
                    receiver.received.append(Received(dict(self.headers.items()), body, status))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def snapshot(self) -> list[Received]:
        with self.lock:
            return list(self.received)

    def accepted(self) -> list[dict[str, Any]]:
        """The events it took (answered 2xx), in order."""
        return [r.event for r in self.snapshot() if r.status < 300]


def parse_sse(text: str) -> list[dict[str, str]]:
    """The events of a server-sent event stream's text (comments dropped)."""
    found: list[dict[str, str]] = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            fields[name] = value[1:] if value.startswith(" ") else value
        if "event" in fields or "data" in fields:
            found.append(fields)
    return found
