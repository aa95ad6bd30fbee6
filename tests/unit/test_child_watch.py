"""The operator's own Deployment watch against a local HTTP server scripted as the API
server's Deployment collection (a list, then watch streams): it watches again from the
last resourceVersion when the server ends a stream, lists again on 410 Gone and hands on
what changed meanwhile (deletions included), and asks for this shard's Deployments alone.
A stream ended by the real API server and another shard's Deployments on a real one are
in tests/integration/test_child_watch.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web

from agent_operator.child_watch import ChildWatch, deployment_selector
from agent_operator.kube import Kube
from humanwork_core.kube_credentials import Credentials


def deployment(name: str, version: str, ready: int = 0) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "namespace": "org-a",
            "name": name,
            "resourceVersion": version,
            "ownerReferences": [
                {"apiVersion": "humanwork.io/v1alpha1", "kind": "AgentInstance", "name": name}
                | {"controller": True, "uid": "u-" + name}
            ],
        },
        "status": {"replicas": 1, "readyReplicas": ready},
    }


class FakeApiServer:
    """Answers the Deployment collection: each list from `lists`, each watch from
    `watches` (a list of events to stream, then the stream ends; None: hold it open; an
    int: that HTTP status). Records every request's query."""

    def __init__(self, lists: list[tuple[list[dict[str, Any]], str]], watches: list[Any]):
        self.lists, self.watches = lists, watches
        self.list_queries: list[dict[str, str]] = []
        self.watch_queries: list[dict[str, str]] = []
        self.closing = asyncio.Event()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        query = dict(request.query)
        if query.get("watch") != "1":
            self.list_queries.append(query)
            items, version = self.lists.pop(0)
            return web.json_response({"items": items, "metadata": {"resourceVersion": version}})
        self.watch_queries.append(query)
        script = self.watches.pop(0) if self.watches else None
        if isinstance(script, int):
            return web.json_response({"kind": "Status", "code": script}, status=script)
        response = web.StreamResponse()
        await response.prepare(request)
        for event in script or []:
            await response.write(json.dumps(event).encode() + b"\n")
        if script is None:
            await self.closing.wait()  # held open until the test ends
            return response
        await response.write_eof()
        return response


@pytest.fixture
async def served() -> AsyncIterator[Callable[[FakeApiServer], Awaitable[Kube]]]:
    """Serve a fake on a free loopback port; the operator's client of it."""
    runners: list[web.AppRunner] = []
    clients: list[Kube] = []
    fakes: list[FakeApiServer] = []

    async def start(fake: FakeApiServer) -> Kube:
        fakes.append(fake)
        app = web.Application()
        app.router.add_get("/apis/apps/v1/deployments", fake.handle)
        runner = web.AppRunner(app)
        await runner.setup()
        runners.append(runner)
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        port = runner.addresses[0][1]
        creds = Credentials(server=f"http://127.0.0.1:{port}", ssl_context=False)
        clients.append(Kube.open(creds, field_manager="t", user_agent="t", connections=4))
        return clients[-1]

    yield start
    for fake in fakes:
        fake.closing.set()
    for kube in clients:
        await kube.close()
    for runner in runners:
        await runner.cleanup()


class Seen:
    """The events handed on, and a wait for the n-th."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []
        self.owners: dict[tuple[str, str], str] = {}
        self._changed = asyncio.Condition()

    async def handle(self, kind: str, body: dict[str, Any]) -> None:
        meta = body["metadata"]
        async with self._changed:
            self.events.append((kind, meta["name"], str(meta.get("resourceVersion") or "")))
            refs = meta.get("ownerReferences") or [{}]
            self.owners[(kind, meta["name"])] = f"{refs[0].get('kind')}/{refs[0].get('name')}"
            self._changed.notify_all()

    async def wait_for(self, count: int) -> list[tuple[str, str, str]]:
        async with self._changed:
            await asyncio.wait_for(
                self._changed.wait_for(lambda: len(self.events) >= count), timeout=10
            )
        return self.events


async def test_a_stream_the_server_ends_is_watched_again_from_the_last_version(
    served: Any,
) -> None:
    fake = FakeApiServer(
        lists=[([deployment("a", "5")], "10")],
        watches=[
            [{"type": "MODIFIED", "object": deployment("a", "11", ready=1)}],  # then ends
            [
                {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "12"}}},
                {"type": "MODIFIED", "object": deployment("a", "13", ready=0)},
            ],
            None,
        ],
    )
    seen = Seen()
    watch = ChildWatch(
        await served(fake), "apps/v1", "Deployment", deployment_selector("s1"), seen.handle
    )
    watch.start()
    try:
        events = await seen.wait_for(2)
        await asyncio.wait_for(_until(lambda: len(fake.watch_queries) >= 3), timeout=10)
    finally:
        await watch.stop()
    # the listing is handed to no one; each event once, in order
    assert events == [("MODIFIED", "a", "11"), ("MODIFIED", "a", "13")]
    assert [q["resourceVersion"] for q in fake.watch_queries] == ["10", "11", "13"]
    assert len(fake.list_queries) == 1  # resumed, never listed again
    assert watch.listings == 1
    # stopped with the operator: its stream held open is ended, no handler task is left
    assert watch._task is not None and watch._task.done()
    assert not watch._workers


async def test_410_gone_lists_again_and_hands_on_every_change_missed(served: Any) -> None:
    fake = FakeApiServer(
        lists=[
            ([deployment("a", "5"), deployment("b", "6")], "10"),
            ([deployment("a", "15", ready=1), deployment("c", "16")], "20"),
        ],
        watches=[
            # the API server's answer to a version it no longer keeps
            [{"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}],
            [{"type": "MODIFIED", "object": deployment("c", "21", ready=1)}],
            None,
        ],
    )
    seen = Seen()
    watch = ChildWatch(
        await served(fake), "apps/v1", "Deployment", deployment_selector("s1"), seen.handle
    )
    watch.start()
    try:
        events = await seen.wait_for(4)
    finally:
        await watch.stop()
    # a and c as they are now, b (gone while the watch was away) as deleted, then the
    # watch from the new listing's version
    assert sorted(events[:3]) == [
        ("DELETED", "b", ""),
        ("MODIFIED", "a", "15"),
        ("MODIFIED", "c", "16"),
    ]
    assert events[3] == ("MODIFIED", "c", "21")
    assert [q["resourceVersion"] for q in fake.watch_queries][:2] == ["10", "20"]
    assert len(fake.list_queries) == 2
    assert set(watch.known) == {("org-a", "a"), ("org-a", "c")}
    assert seen.owners[("DELETED", "b")] == "AgentInstance/b"  # what the handler reconciles


async def test_a_refused_watch_is_tried_again_and_every_request_asks_for_the_shard(
    served: Any,
) -> None:
    fake = FakeApiServer(
        lists=[([], "10")],
        watches=[500, [{"type": "ADDED", "object": deployment("a", "11")}], None],
    )
    seen = Seen()
    watch = ChildWatch(
        await served(fake), "apps/v1", "Deployment", deployment_selector("s1"), seen.handle
    )
    watch.start()
    try:
        assert await seen.wait_for(1) == [("ADDED", "a", "11")]
    finally:
        await watch.stop()
    assert [q["resourceVersion"] for q in fake.watch_queries][:2] == ["10", "10"]
    wanted = "app.kubernetes.io/managed-by=humanwork-operator,app.kubernetes.io/component=agent"
    for query in fake.list_queries + fake.watch_queries:
        assert query["labelSelector"] == f"{wanted},humanwork.io/shard=s1"


def test_the_default_shard_selects_the_deployments_without_a_shard_label() -> None:
    assert deployment_selector("").endswith(",!humanwork.io/shard")
    assert deployment_selector("s1").endswith(",humanwork.io/shard=s1")


async def test_events_of_one_deployment_are_handled_in_turn_the_latest_state_kept() -> None:
    """A newer event of a Deployment whose last one is still being handled waits, and
    is coalesced with any other that came meanwhile; a deletion waiting is kept."""
    release = asyncio.Event()
    handled: list[tuple[str, str]] = []

    async def handle(kind: str, body: dict[str, Any]) -> None:
        handled.append((kind, body["metadata"]["resourceVersion"]))
        await release.wait()

    watch = ChildWatch(None, "apps/v1", "Deployment", "", handle)  # type: ignore[arg-type]
    watch._event("MODIFIED", deployment("a", "1"))
    await asyncio.sleep(0)
    watch._event("DELETED", deployment("a", "2"))
    watch._event("ADDED", deployment("a", "3"))
    watch._event("MODIFIED", deployment("b", "4"))  # another Deployment is not held
    await asyncio.wait_for(_until(lambda: len(handled) == 2), timeout=5)
    assert handled == [("MODIFIED", "1"), ("MODIFIED", "4")]
    release.set()
    await asyncio.wait_for(_until(lambda: len(handled) == 3), timeout=5)
    assert handled[2] == ("DELETED", "3")
    await watch.stop()


async def _until(condition: Callable[[], bool]) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the condition never held")


async def test_only_the_types_asked_for_are_handed_on_and_every_object_is_known() -> None:
    handled: list[str] = []

    async def handle(kind: str, body: dict[str, Any]) -> None:
        handled.append(kind)

    watch = ChildWatch(None, "v1", "ConfigMap", "", handle, types=("DELETED",))  # type: ignore[arg-type]
    watch._event("ADDED", deployment("a", "1"))
    watch._event("MODIFIED", deployment("a", "2"))
    assert watch.known == {("org-a", "a"): ("humanwork.io/v1alpha1", "AgentInstance", "a")}
    watch._event("DELETED", deployment("a", "3"))  # the positive control
    await asyncio.wait_for(_until(lambda: handled == ["DELETED"]), timeout=5)
    assert watch.known == {}
    assert watch.version == "3"
    await watch.stop()
