"""A client's message dispatches itself end to end: the platform API, the operator and the
org's agent as processes (the agent's offline responder). The client writes through its
own endpoint; with nobody pressing a button the platform routes the message to the org's
agent with a signed command, the agent classifies and drafts, the draft waits in the
expert's queue, and the reply the expert sends appears in the conversation the client
reads. With the agent stopped, the client reads that the agent did not answer and the
experts' event log has `dispatch_failed`."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from tests.e2e.conftest import World

QUESTION = "Where is my order 1042? It has not arrived yet."


async def _client(world: World) -> dict[str, str]:
    return (await world.add_user("client", "client"))[2]


async def _start(world: World, client: dict[str, str], message: str) -> str:
    r = await world.http.post(
        f"{world.platform.url}/orgs/{world.org_id}/conversations",
        json={"subject": "Order 1042", "message": message},
        headers=client,
    )
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def _read_until(
    world: World, client: dict[str, str], cid: str, kind: str, within: float = 90
) -> list[dict[str, Any]]:
    """The conversation as the client reads it, once a message of `kind` is in it."""
    deadline = time.monotonic() + within
    while True:
        r = await world.http.get(
            f"{world.platform.url}/orgs/{world.org_id}/conversations/{cid}", headers=client
        )
        assert r.status_code == 200, r.text
        found: list[dict[str, Any]] = r.json()["messages"]
        if any(m["author_kind"] == kind for m in found):
            return found
        assert time.monotonic() < deadline, (found, world.agent.tail(40))
        await asyncio.sleep(0.2)


async def _reply_item(world: World, cid: str, within: float = 90) -> dict[str, Any]:
    deadline = time.monotonic() + within
    while True:
        r = await world.http.get(
            f"{world.platform.url}/human-tasks",
            params={"org_id": world.org_id, "limit": 500},
            headers=world.expert,
        )
        assert r.status_code == 200, r.text
        for item in r.json()["items"]:
            if item["kind"] == "reply" and item["task_id"] == f"conversations/{cid}":
                return dict(item)
        assert time.monotonic() < deadline, world.agent.tail(40)
        await asyncio.sleep(0.2)


async def test_a_clients_question_is_drafted_reviewed_and_answered(world: World) -> None:
    client = await _client(world)
    cid = await _start(world, client, QUESTION)
    item = await _reply_item(world, cid)  # nobody asked for the draft: the message did
    reply_id = item["id"].removeprefix("replies/")
    r = await world.http.get(
        f"{world.platform.url}/human-tasks/replies/{reply_id}", headers=world.expert
    )
    assert r.status_code == 200, r.text
    assert r.json()["state"] == "pending" and r.json()["requested_by"].startswith("client-")
    r = await world.http.post(
        f"{world.platform.url}/human-tasks/replies/{reply_id}/resume",
        json={"action": "edit", "text": "Order 1042 arrives on Friday."},
        headers=world.expert,
    )
    assert r.status_code == 200, r.text
    thread = await _read_until(world, client, cid, "agent")
    assert [(m["author_kind"], m["content"]) for m in thread] == [
        ("client", QUESTION),
        ("agent", "Order 1042 arrives on Friday."),
    ]


async def test_a_stopped_agent_leaves_a_visible_state(world: World) -> None:
    client = await _client(world)
    world.agent.stop()
    try:
        cid = await _start(world, client, QUESTION)
        thread = await _read_until(world, client, cid, "system")
    finally:
        world.agent.start()
    (said,) = [m for m in thread if m["author_kind"] == "system"]
    assert said["content"] == "The agent did not answer; an expert was told."
    assert said["meta"]["event"] == "dispatch_failed"
