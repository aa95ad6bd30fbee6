"""The live event stream from the attacker's side: a user deactivated, or removed from
its org, while it holds an open stream loses the stream (on this replica at once, on
another at its next look), while another member's stream stays open beside it."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from humanwork_dev.processes import free_port
from platform_api.settings import Settings
from tests.platform.conftest import Caller, TwoOrgs, make_settings

ENDS_WITHIN = 30.0
"""A generous bound for a stream to end on a loaded machine (the look is every 0.5 s)."""


async def _until(condition: Callable[[], bool], what: str) -> None:
    """Wait (polling) until `condition` holds, at most `ENDS_WITHIN` seconds."""
    deadline = time.monotonic() + ENDS_WITHIN
    while True:
        if condition():
            return
        assert time.monotonic() < deadline, f"not within {ENDS_WITHIN}s: {what}"
        await asyncio.sleep(0.05)


@pytest.fixture
def settings(database_url: str) -> Settings:
    return make_settings(database_url, notify_interval_seconds=0.5, events_heartbeat_seconds=0.5)


@pytest.fixture
async def served(app: FastAPI) -> AsyncIterator[str]:
    """The app served over real HTTP on loopback (the stream needs a server that streams)."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="off", log_level="warning")
    )
    running = asyncio.create_task(server.serve())
    await _until(lambda: server.started, "the server started")
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    with contextlib.suppress(asyncio.CancelledError):
        await running


class Stream:
    """One open `/human-tasks/events` stream, read in the background."""

    def __init__(self, base: str, caller: Caller) -> None:
        self.base, self.caller, self.text = base, caller, ""
        self.connected = asyncio.Event()
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> str:
        headers = {**self.caller.headers, "Accept": "text/event-stream"}
        async with (
            httpx.AsyncClient(base_url=self.base, timeout=120) as http,
            http.stream("GET", "/human-tasks/events", headers=headers) as answer,
        ):
            assert answer.status_code == 200, await answer.aread()
            async for chunk in answer.aiter_text():
                self.text += chunk
                if ": connected" in self.text:
                    self.connected.set()
        return self.text

    async def open(self) -> Stream:
        await asyncio.wait_for(asyncio.shield(self.connected.wait()), ENDS_WITHIN)
        return self

    async def beats_after(self, mark: int) -> None:
        """Wait until the stream sent another heartbeat after `mark` characters."""
        await _until(lambda: ": heartbeat" in self.text[mark:] or self.task.done(), "a heartbeat")
        assert not self.task.done(), self.text

    async def close(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


async def test_a_deactivated_users_open_stream_ends(
    served: str, client: httpx.AsyncClient, two_orgs: TwoOrgs
) -> None:
    victim = await Stream(served, two_orgs.viewer_a).open()
    other = await Stream(served, two_orgs.expert_a).open()
    try:
        await victim.beats_after(0)  # open and alive before the change
        r = await client.post("/users/viewer-a/deactivate", headers=two_orgs.admin_a.headers)
        assert r.status_code == 200, r.text
        ended = await asyncio.wait_for(victim.task, ENDS_WITHIN)
        assert ended.endswith(": access ended\n\n"), ended
        # positive control: the other member's stream stays open and beating
        await other.beats_after(len(other.text))
    finally:
        await victim.close()
        await other.close()


async def test_a_removed_members_stream_ends_when_another_replica_removes_it(
    served: str, two_orgs: TwoOrgs, db: AsyncEngine
) -> None:
    victim = await Stream(served, two_orgs.viewer_a).open()
    other = await Stream(served, two_orgs.expert_a).open()
    try:
        # another replica's removal: no wake-up here, only the stream's next look
        async with db.begin() as conn:
            await conn.execute(
                text(
                    "DELETE FROM memberships WHERE user_id = "
                    "(SELECT id FROM users WHERE username = 'viewer-a')"
                )
            )
        ended = await asyncio.wait_for(victim.task, ENDS_WITHIN)
        assert ended.endswith(": access ended\n\n"), ended
        await other.beats_after(len(other.text))
    finally:
        await victim.close()
        await other.close()
