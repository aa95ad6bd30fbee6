"""A conversation's live stream from the attacker's side: a client's stream carries the
conversation's messages but never an expert's internal note (which the expert's stream
beside it carries), another org's client and a client of another conversation are refused
(404), and a deactivated client has its stream ended and its next request refused (401)
while the expert's stream stays open."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from humanwork_dev.postgres import PostgresServer
from platform_api.settings import Settings
from tests.platform.clients_support import World, backend_url, code, seeded_world, start
from tests.platform.conftest import Api, make_settings
from tests.platform.stream_support import (
    WITHIN,
    Stream,
    served,  # noqa: F401 (a fixture)
    until,
)


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
async def world(api: Api, app: FastAPI, settings: Settings) -> World:
    # no Kubernetes here: the dispatch of clients' messages (tests/platform/test_dispatch*)
    # would answer each of them "the agent did not answer"; these tests are the API's
    app.state.dispatcher.paused = True
    return await seeded_world(api, settings)


async def test_a_clients_stream_never_carries_a_note_and_ends_when_it_is_deactivated(
    client: httpx.AsyncClient,
    world: World,
    served: str,  # noqa: F811 (the fixture)
) -> None:
    mine = await start(client, world.client_1, world.org_a, "Refund", "Refund order 1042")
    path = f"/orgs/{world.org_a}/conversations/{mine['id']}"
    async with httpx.AsyncClient(base_url=served, timeout=30) as http:
        for caller in (world.client_b, world.client_2):  # another org's, another client's
            r = await http.get(f"{path}/events", headers=caller.headers)
            assert r.status_code == 404 and code(r) == "not_found"
    theirs = await Stream(served, world.client_1, f"{path}/events").open()
    expert = await Stream(served, world.expert_a, f"{path}/events").open()
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
        await until(lambda: len(expert.messages()) == 2, "the expert saw the note and message")
        await until(lambda: len(theirs.messages()) == 1, "the client saw its message")
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
        await until(lambda: len(expert.messages()) == 3, "the expert's stream goes on")
    finally:
        await theirs.close()
        await expert.close()


async def test_a_stream_ends_when_the_org_stops_sharing(
    client: httpx.AsyncClient,
    world: World,
    served: str,  # noqa: F811 (the fixture)
) -> None:
    other = await start(client, world.client_2, world.org_a, "Stock", "How many vases?")
    path = f"/orgs/{world.org_a}/conversations/{other['id']}"
    settings = f"/orgs/{world.org_a}/client-settings"
    share = {"clients_share_conversations": True}
    assert (await client.put(settings, json=share, headers=world.admin_a.headers)).is_success
    reader = await Stream(served, world.client_1, f"{path}/events").open()
    owner = await Stream(served, world.client_2, f"{path}/events").open()
    try:
        r = await client.put(settings, json={}, headers=world.admin_a.headers)
        assert r.status_code == 200 and r.json()["clients_share_conversations"] is False
        await asyncio.wait_for(reader.task, WITHIN)
        assert ": access ended" in reader.text
        r = await client.post(
            f"{path}/messages", json={"content": "still there?"}, headers=world.client_2.headers
        )
        assert r.status_code == 201
        await until(lambda: len(owner.messages()) == 1, "the owner's stream goes on")
        assert "still there?" not in reader.text
    finally:
        await reader.close()
        await owner.close()
