"""The client's read model of the tasks its conversation started, on the real control
plane: only the conversation's tasks, each step in plain language with its parameters
redacted, its decision, a rejection's feedback and its execution; the same over the
conversation's stream (`task` events when a task changes); nothing for another org's
client or another client of the same org (404)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from humanwork_dev.processes import free_port
from tests.platform.conftest import Api, Caller
from tests.platform_k8s.conftest import PLAN, Orgs, TaskApi, until

WITHIN = 60.0


@pytest.fixture
async def served(app: FastAPI) -> AsyncIterator[str]:
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="off", log_level="warning")
    )
    running = asyncio.create_task(server.serve())
    deadline = time.monotonic() + WITHIN
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        await asyncio.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    with contextlib.suppress(asyncio.CancelledError):
        await running


def _plan(org_id: str, conversation: str) -> dict[str, Any]:
    steps = [dict(step) for step in PLAN["steps"]]
    steps[0]["parameters"] = {"month": "2026-10", "notify": "jane.doe@example.com"}
    return {"orgId": org_id, "conversationId": conversation, "steps": steps}


async def _client_tasks(client: httpx.AsyncClient, caller: Caller, path: str) -> Any:
    r = await client.get(path, headers=caller.headers)
    assert r.status_code == 200, r.text
    return r.json()["items"]


async def test_a_client_follows_the_tasks_of_its_conversation(
    api: Api, client: httpx.AsyncClient, orgs: Orgs, tasks: TaskApi, served: str
) -> None:
    root = await api.admin()
    suffix = orgs.ns_a.removeprefix("org-a-")
    me = await api.user(root, f"client-{suffix}", "client", [orgs.org_a])
    other = await api.user(root, f"client2-{suffix}", "client", [orgs.org_a])
    stranger = await api.user(root, f"client-b-{suffix}", "client", [orgs.org_b])
    r = await client.post(
        f"/orgs/{orgs.org_a}/conversations",
        json={"subject": "October", "message": "Reconcile October"},
        headers=me.headers,
    )
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    made = await tasks.create(orgs.requester, orgs.org_a, **_plan(orgs.org_a, cid))
    await tasks.create(orgs.requester, orgs.org_a)  # another conversation's task
    path = f"/orgs/{orgs.org_a}/conversations/{cid}/tasks"

    for caller in (stranger, other):
        r = await client.get(path, headers=caller.headers)
        assert r.status_code == 404 and r.json()["code"] == "not_found"
    r = await client.get(f"/orgs/{orgs.org_b}/conversations/{cid}/tasks", headers=stranger.headers)
    assert r.status_code == 404

    items = await _client_tasks(client, me, path)
    assert [t["name"] for t in items] == [made["name"]]
    task = items[0]
    assert task["status"] == "pending_approval" and task["uid"] == made["uid"]
    read, write = task["steps"]
    assert (read["order"], write["order"]) == (1, 2)
    assert read["decision"] == "pending" and read["execution"] == "not_started"
    assert read["confirmation"] is None and read["risk"] == "high"
    assert "2026-10" in read["summary"] and "[email]" in read["summary"]
    assert "jane.doe" not in json.dumps(items)
    assert set(read) == {
        "id", "order", "description", "tool", "risk", "state", "summary", "decision",
        "feedback", "execution", "result", "confirmation",
    }  # fmt: skip

    headers = {**me.headers, "Accept": "text/event-stream"}
    seen: list[dict[str, Any]] = []

    async def read_stream() -> None:
        async with (
            httpx.AsyncClient(base_url=served, timeout=120) as http,
            http.stream(
                "GET", f"/orgs/{orgs.org_a}/conversations/{cid}/events", headers=headers
            ) as answer,
        ):
            assert answer.status_code == 200
            text = ""
            async for chunk in answer.aiter_text():
                text += chunk
                while "\n\n" in text:
                    block, text = text.split("\n\n", 1)
                    if "event: task" in block.split("\n"):
                        data = block.split("data: ", 1)[1]
                        seen.append(json.loads(data))

    streaming = asyncio.create_task(read_stream())
    try:
        await until(lambda: _seen(seen), lambda s: len(s) >= 1, WITHIN)  # the snapshot
        body = {"stepHash": made["step_hashes"]["read"], "feedback": "wrong month"}
        r = await tasks.decide(orgs.expert, made["id"], "read", "reject", body)
        assert r.status_code == 200, r.text
        last = await until(
            lambda: _seen(seen), lambda s: s[-1]["steps"][0]["decision"] == "rejected", WITHIN
        )
        assert last[-1]["steps"][0]["feedback"] == "wrong month"
        items = await _client_tasks(client, me, path)
        assert items[0]["steps"][0]["decision"] == "rejected"
        final = await until(
            lambda: _client_tasks(client, me, path), lambda i: i[0]["status"] == "rejected"
        )
        assert final[0]["phase"] == "Rejected"
    finally:
        streaming.cancel()
        with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError):
            await streaming


async def _seen(seen: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return list(seen)
