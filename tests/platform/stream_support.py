"""What the live-stream tests share: the app served over real HTTP on loopback (`served`, a
fixture: a stream needs a server that streams), one open stream read in the background
(`Stream`), and a wait on a condition with a generous bound (`until`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from humanwork_dev.processes import free_port
from tests.platform.conftest import Caller

WITHIN = 30.0
"""A generous bound for an event, a heartbeat or a stream's end on a loaded machine."""


async def until(condition: Callable[[], bool], what: str) -> None:
    """Wait (polling) until `condition` holds, at most `WITHIN` seconds."""
    deadline = time.monotonic() + WITHIN
    while not condition():
        assert time.monotonic() < deadline, f"not within {WITHIN}s: {what}"
        await asyncio.sleep(0.05)


@pytest.fixture
async def served(app: FastAPI) -> AsyncIterator[str]:
    """The app served over real HTTP on loopback."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="off", log_level="warning")
    )
    running = asyncio.create_task(server.serve())
    await until(lambda: server.started, "the server started")
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    with contextlib.suppress(asyncio.CancelledError):
        await running


class Stream:
    """One open event stream (`/human-tasks/events` unless `path` says), read in the
    background."""

    def __init__(self, base: str, caller: Caller, path: str = "/human-tasks/events") -> None:
        self.base, self.path, self.caller, self.text = base, path, caller, ""
        self.connected = asyncio.Event()
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> str:
        headers = {**self.caller.headers, "Accept": "text/event-stream"}
        async with (
            httpx.AsyncClient(base_url=self.base, timeout=120) as http,
            http.stream("GET", self.path, headers=headers) as answer,
        ):
            assert answer.status_code == 200, await answer.aread()
            async for chunk in answer.aiter_text():
                self.text += chunk
                if ": connected" in self.text:
                    self.connected.set()
        return self.text

    async def open(self) -> Stream:
        await asyncio.wait_for(asyncio.shield(self.connected.wait()), WITHIN)
        return self

    def messages(self) -> list[dict[str, object]]:
        """The `message` events read so far, decoded."""
        found = []
        for block in self.text.split("\n\n"):
            lines = block.split("\n")
            if "event: message" in lines:
                data = next(line for line in lines if line.startswith("data: "))
                found.append(json.loads(data.removeprefix("data: ")))
        return found

    async def beats_after(self, mark: int) -> None:
        """Wait until the stream sent another heartbeat after `mark` characters."""
        await until(lambda: ": heartbeat" in self.text[mark:] or self.task.done(), "a heartbeat")
        assert not self.task.done(), self.text

    async def close(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError):
            await self.task
