"""A conversation's live stream from the attacker's side: a client's stream carries the
conversation's messages but never an expert's internal note (which the expert's stream
beside it carries), another org's client and a client of another conversation are refused
(404), and a deactivated client has its stream ended and its next request refused (401)
while the expert's stream stays open."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from humanwork_dev.postgres import PostgresServer
from humanwork_dev.processes import free_port
from platform_api.settings import Settings
from tests.platform.clients_support import World, backend_url, code, make_world, start
from tests.platform.conftest import Api, Caller, make_settings

WITHIN = 30.0
"""A generous bound for an event or the stream's end on a loaded machine."""


async def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WITHIN
    while not condition():
        assert time.monotonic() < deadline, f"not within {WITHIN}s: {what}"
        await asyncio.sleep(0.05)


@pytest.fixture(params=["postgresql", "sqlite"])
async def database_url(
    request: pytest.FixtureRequest,
    postgres: PostgresServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[str]:
    async for url in backend_url(request, postgres, tmp_path, monkeypatch):
        yield url


@pytest.fixture
def settings(database_url: str) -> Settings:
    return make_settings(database_url, notify_interval_seconds=0.5, events_heartbeat_seconds=0.5)


@pytest.fixture
async def world(api: Api, app: FastAPI) -> World:
    # no Kubernetes here: the dispatch of clients' messages (tests/platform/test_dispatch*)
    # would answer each of them "the agent did not answer"; these tests are the API's
    app.state.dispatcher.paused = True
    return await make_world(api)


@pytest.fixture
async def served(app: FastAPI) -> AsyncIterator[str]:
    """The app over real HTTP on loopback (a stream needs a server that streams)."""
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
    """One open conversation stream, read in the background."""

    def __init__(self, base: str, path: str, caller: Caller) -> None:
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
        found = []
        for block in self.text.split("\n\n"):
            lines = block.split("\n")
            if "event: message" in lines:
                data = next(line for line in lines if line.startswith("data: "))
                found.append(json.loads(data.removeprefix("data: ")))
        return found

    async def close(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError):
            await self.task


async def test_a_clients_stream_never_carries_a_note_and_ends_when_it_is_deactivated(
    client: httpx.AsyncClient, world: World, served: str
) -> None:
    mine = await start(client, world.client_1, world.org_a, "Refund", "Refund order 1042")
    path = f"/orgs/{world.org_a}/conversations/{mine['id']}"
    async with httpx.AsyncClient(base_url=served, timeout=30) as http:
        for caller in (world.client_b, world.client_2):  # another org's, another client's
            r = await http.get(f"{path}/events", headers=caller.headers)
            assert r.status_code == 404 and code(r) == "not_found"
    theirs = await Stream(served, f"{path}/events", world.client_1).open()
    expert = await Stream(served, f"{path}/events", world.expert_a).open()
    try:
        r = await client.post(
            f"{path}/notes",
            json={"content": "internal: fraud check"},
            headers=world.expert_a.headers,
        )
        assert r.status_code == 201
        r = await client.post(
            f"{path}/messages", json={"content": "any news?"}, headers=world.client_1.headers
        )
        assert r.status_code == 201
        await _until(lambda: len(expert.messages()) == 2, "the expert saw the note and message")
        await _until(lambda: len(theirs.messages()) == 1, "the client saw its message")
        assert [m["content"] for m in expert.messages()] == ["internal: fraud check", "any news?"]
        assert [m["author_kind"] for m in theirs.messages()] == ["client"]
        assert "fraud" not in theirs.text

        r = await client.post("/users/client-1/deactivate", headers=world.root.headers)
        assert r.status_code == 200, r.text
        await asyncio.wait_for(theirs.task, WITHIN)  # the client's stream ends
        assert ": access ended" in theirs.text
        r = await client.get(path, headers=world.client_1.headers)
        assert r.status_code == 401 and code(r) == "user_deactivated"
        assert not expert.task.done()  # the positive control: the expert's stays open
        r = await client.post(
            f"{path}/notes", json={"content": "closed"}, headers=world.expert_a.headers
        )
        await _until(lambda: len(expert.messages()) == 3, "the expert's stream goes on")
    finally:
        await theirs.close()
        await expert.close()


async def test_a_stream_ends_when_the_org_stops_sharing(
    client: httpx.AsyncClient, world: World, served: str
) -> None:
    other = await start(client, world.client_2, world.org_a, "Stock", "How many vases?")
    path = f"/orgs/{world.org_a}/conversations/{other['id']}"
    settings = f"/orgs/{world.org_a}/client-settings"
    share = {"clients_share_conversations": True}
    assert (await client.put(settings, json=share, headers=world.admin_a.headers)).is_success
    reader = await Stream(served, f"{path}/events", world.client_1).open()
    owner = await Stream(served, f"{path}/events", world.client_2).open()
    try:
        r = await client.put(settings, json={}, headers=world.admin_a.headers)
        assert r.status_code == 200 and r.json()["clients_share_conversations"] is False
        await asyncio.wait_for(reader.task, WITHIN)
        assert ": access ended" in reader.text
        r = await client.post(
            f"{path}/messages", json={"content": "still there?"}, headers=world.client_2.headers
        )
        assert r.status_code == 201
        await _until(lambda: len(owner.messages()) == 1, "the owner's stream goes on")
        assert "still there?" not in reader.text
    finally:
        await reader.close()
        await owner.close()
