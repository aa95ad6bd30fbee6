"""Each run of a step of a task started from a conversation is told in that conversation,
once, with its result in plain language, on the real control plane and PostgreSQL with two
platform replicas watching the same tasks: an executed step yields exactly one system
message `step_executed` (its result summary, redacted), a failed step exactly one
`step_failed` (its reason, redacted), both visible to the client in
`GET .../conversations/{cid}` and on the conversation's stream, and neither carries the
step's parameters or an expert's internal note."""

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
from platform_api.app import create_app
from platform_api.settings import Settings
from tests.browser.support import record_execution
from tests.conftest import Cluster
from tests.platform.conftest import Api, Caller
from tests.platform_k8s.conftest import Orgs, TaskApi, until

WITHIN = 60.0
SECRET = "sk_live_4f9a8b7c6d5e4f3a2b1c"
NOTE = "internal: the merchant is behind on payments"
STEPS = [
    {
        "id": "read",
        "description": "Fetch October orders",
        "kind": "action",
        "tool": "amazon_query",
        "parameters": {"month": "2026-10", "contact": "jane.doe@example.com"},
        "risk": "high",
    },
    {
        "id": "write",
        "description": "Update inventory of 14 SKUs",
        "kind": "action",
        "tool": "shopify_query",
        "parameters": {"skus": 14},
        "risk": "high",
    },
]


@pytest.fixture
async def second_replica(settings: Settings, app: FastAPI, resolver: Any) -> AsyncIterator[FastAPI]:
    """Another replica of the platform on the same database and cluster: its own watch
    and notifier."""
    other = create_app(settings, resolver=resolver)
    async with other.router.lifespan_context(other):
        yield other


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


async def _messages(client: httpx.AsyncClient, caller: Caller, path: str) -> list[dict[str, Any]]:
    r = await client.get(path, params={"limit": 200}, headers=caller.headers)
    assert r.status_code == 200, r.text
    found: list[dict[str, Any]] = r.json()["messages"]
    return found


def _told(messages: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    return [m for m in messages if (m.get("meta") or {}).get("event") == event]


async def _stream(
    served: str, path: str, caller: Caller, seen: list[dict[str, Any]], opened: asyncio.Event
) -> None:
    headers = {**caller.headers, "Accept": "text/event-stream"}
    async with (
        httpx.AsyncClient(base_url=served, timeout=120) as http,
        http.stream("GET", f"{path}/events", headers=headers) as answer,
    ):
        assert answer.status_code == 200
        text = ""
        async for chunk in answer.aiter_text():
            text += chunk
            while "\n\n" in text:
                block, text = text.split("\n\n", 1)
                lines = block.split("\n")
                if "event: task" in lines:
                    opened.set()
                if "event: message" in lines:
                    seen.append(json.loads(block.split("data: ", 1)[1]))


async def test_each_run_of_a_step_is_told_once_with_its_result(
    api: Api,
    client: httpx.AsyncClient,
    second_replica: FastAPI,
    orgs: Orgs,
    tasks: TaskApi,
    cluster: Cluster,
    served: str,
) -> None:
    root = await api.admin()
    me = await api.user(root, f"client-{orgs.ns_a.removeprefix('org-a-')}", "client", [orgs.org_a])
    r = await client.post(
        f"/orgs/{orgs.org_a}/conversations", json={"subject": "October"}, headers=me.headers
    )
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    path = f"/orgs/{orgs.org_a}/conversations/{cid}"
    made = await tasks.create(orgs.requester, orgs.org_a, conversationId=cid, steps=STEPS)
    seen: list[dict[str, Any]] = []
    opened = asyncio.Event()  # the stream sends every task once when it opens
    streaming = asyncio.create_task(_stream(served, path, me, seen, opened))
    try:
        await asyncio.wait_for(opened.wait(), WITHIN)
        r = await client.post(f"{path}/notes", json={"content": NOTE}, headers=orgs.expert.headers)
        assert r.status_code == 201, r.text
        await tasks.until(orgs.expert, made["id"], lambda t: bool(t["status"].get("steps")))
        assert (await tasks.decide(orgs.expert, made["id"], "read")).status_code == 200
        result = {"summary": f"Found 42 October orders (api_key={SECRET})", "orders": 42}
        record_execution(cluster, made["id"], "read", result)
        await tasks.until(
            orgs.expert, made["id"], lambda t: t["status"].get("currentStep") == "write"
        )
        assert (await tasks.decide(orgs.expert, made["id"], "write")).status_code == 200
        error = f"the shop answered 500 (token: {SECRET})"
        record_execution(cluster, made["id"], "write", None, "Failed", error)

        # the request's end is told after the steps' runs (one transaction per task's
        # events on each replica): once it is there, every replica has told what it would
        done = await until(
            lambda: _messages(client, me, path), lambda m: bool(_told(m, "request_ended")), WITHIN
        )
        await until(lambda: _list(seen), lambda s: bool(_told(s, "request_ended")), WITHIN)
    finally:
        streaming.cancel()
        with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError):
            await streaming

    [executed] = _told(done, "step_executed")
    assert executed["author_kind"] == "system" and executed["internal"] is False
    assert executed["meta"]["task"] == made["name"] and executed["meta"]["step"] == "read"
    assert executed["content"].startswith("The step “Fetch October orders” was carried out.")
    assert "Found 42 October orders" in executed["content"]
    assert executed["meta"]["result"].startswith("Found 42 October orders")
    [failed] = _told(done, "step_failed")
    assert failed["meta"]["step"] == "write" and failed["internal"] is False
    assert failed["content"].startswith("The step “Update inventory of 14 SKUs” failed.")
    assert "the shop answered 500" in failed["content"]
    # the same messages, once each, on the client's stream (by id: two replicas that both
    # told a run would have written two messages)
    assert [m["id"] for m in _told(seen, "step_executed")] == [executed["id"]]
    assert [m["id"] for m in _told(seen, "step_failed")] == [failed["id"]]
    everything = json.dumps(done) + json.dumps(seen)
    assert SECRET not in everything and "jane.doe" not in everything
    assert NOTE not in everything  # the client never receives the expert's note

    # an expert reading the same conversation sees the same single messages beside the note
    full = await _messages(client, orgs.expert, path)
    assert [m["id"] for m in _told(full, "step_executed")] == [executed["id"]]
    assert any(m["content"] == NOTE and m["internal"] for m in full)


async def _list(seen: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return list(seen)
