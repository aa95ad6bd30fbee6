"""The platform's task watch on the lean client: it ends cleanly when the API server closes
the stream (which a real one does every few minutes, here after `timeoutSeconds`), a new
watch from the last resourceVersion seen carries on without replaying what was seen, and a
version too old to resume from is `KubeGone` (410), after which the decision index lists
again and sees what changed meanwhile.

The continuation runs against the real kube-apiserver; a 410 cannot be provoked there on
demand (it needs etcd compacted past the version), so the Gone cases are served by a local
HTTP server that answers as the API server does (an ERROR event in the stream, or a 410
answer to the request)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from kubernetes import client as kclient

from humanwork_core.keys import ORG_ID_LABEL
from humanwork_core.kube_errors import KubeGone
from humanwork_core.resources.common import GROUP, VERSION
from humanwork_core.resources.names import TASKS
from platform_api.human_tasks.index import DecisionIndex
from platform_api.kube.client import KubeClient
from platform_api.settings import Settings
from tests.conftest import Cluster
from tests.integration.test_tasks import task_manifest

WATCH_SECONDS = 4
"""The server ends each watch after this long: the test sees the close, not a timeout (long
enough for a loaded API server to deliver what happened since the version asked)."""


@pytest.fixture
async def kube(cluster: Cluster, installed: None) -> AsyncIterator[KubeClient]:
    """The platform's client (as the cluster admin: the CRDs installed)."""
    made = await KubeClient.from_settings(Settings(kubeconfig=cluster.kubeconfig))
    assert made is not None
    yield made
    await made.close()


ORG_ID = str(uuid.uuid4())


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    """An org's namespace (labelled with its org id, as the admission policies want)."""
    name = f"watch-{uuid.uuid4().hex[:8]}"
    core = kclient.CoreV1Api(cluster.api)
    meta = kclient.V1ObjectMeta(name=name, labels={ORG_ID_LABEL: ORG_ID})
    core.create_namespace(kclient.V1Namespace(metadata=meta))
    yield name
    core.delete_namespace(name)


def _create(cluster: Cluster, namespace: str) -> str:
    body = task_manifest(namespace, ORG_ID)
    kclient.CustomObjectsApi(cluster.api).create_namespaced_custom_object(
        GROUP, VERSION, namespace, TASKS, body
    )
    return str(body["metadata"]["name"])


Seen = list[tuple[str, str, str, int]]
"""(type, namespace, name, resourceVersion) of each event a watch delivered."""


async def _one_watch(kube: KubeClient, version: str) -> tuple[Seen, str]:
    """The events one watch from `version` delivers until the server closes it, and the
    last resourceVersion it saw (a real API server's versions are etcd's revisions:
    compared as numbers here, which a client must not do)."""
    seen: Seen = []
    async for event in kube.watch_tasks(version, timeout_seconds=WATCH_SECONDS):
        own = int(event.version or 0)  # none: 0, below any version
        version = str(own or version)
        seen.append((event.type, *event.key, own))
    return seen, version


async def test_a_watch_the_server_closes_carries_on_from_the_last_version_seen(
    kube: KubeClient, cluster: Cluster, namespace: str
) -> None:
    pages = [page async for page in kube.list_task_pages()]
    version = pages[-1][1]
    first = _create(cluster, namespace)
    seen, version = await _one_watch(kube, version)
    # the stream ended without an error (the server closed it) and held the change (the
    # shared cluster's operator may change the task too: only additions are compared)
    assert _added(seen, namespace) == [first]
    assert _after(seen, pages[-1][1]) == seen
    second = _create(cluster, namespace)
    again, _ = await _one_watch(kube, version)
    assert _added(again, namespace) == [second], "the next watch replayed or lost a change"
    # nothing at or below the version resumed from, in any namespace, whatever its type
    # (the operator's changes to the first task included): what the resume exists for
    assert _after(again, version) == again, (version, again)


def _added(seen: Seen, namespace: str) -> list[str]:
    return [name for kind, ns, name, _ in seen if kind == "ADDED" and ns == namespace]


def _after(seen: Seen, version: str) -> Seen:
    """The events of `seen` past `version`."""
    return [event for event in seen if event[3] > int(version)]


def _watch_server(answers: list[web.StreamResponse | str]) -> web.Application:
    """A fake API server for AgenticTasks: each list answers the next item listed, each
    watch the next of `answers` ("gone": an ERROR event 410 in a 200 stream; "refuse": a
    410 answer)."""
    listed = iter(["a", "b"])

    async def tasks(request: web.Request) -> web.StreamResponse:
        status = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}
        if request.query.get("watch") != "1":
            item = task_manifest("org-x", str(uuid.uuid4()))
            item["metadata"].update(name=next(listed, "b"), resourceVersion="7")
            return web.json_response({"items": [item], "metadata": {"resourceVersion": "7"}})
        answer = answers.pop(0) if answers else "refuse"
        if answer == "refuse":
            return web.json_response(status, status=410)
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(json.dumps({"type": "ERROR", "object": status}).encode() + b"\n")
        return response

    app = web.Application()
    app.router.add_get(f"/apis/{GROUP}/{VERSION}/{TASKS}", tasks)
    return app


async def _serve(app: web.Application, tmp_path: Path) -> tuple[web.AppRunner, KubeClient]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    config = {
        "current-context": "fake",
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
        "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "fake", "user": {"token": "t"}}],
    }
    (tmp_path / "kubeconfig").write_text(json.dumps(config))
    kube = await KubeClient.from_settings(Settings(kubeconfig=str(tmp_path / "kubeconfig")))
    assert kube is not None
    return runner, kube


@pytest.mark.parametrize("answer", ["gone", "refuse"])
async def test_a_version_too_old_is_gone(answer: str, tmp_path: Path) -> None:
    runner, kube = await _serve(_watch_server([answer]), tmp_path)
    try:
        with pytest.raises(KubeGone, match="too old"):
            async for _ in kube.watch_tasks("1"):
                pass
    finally:
        await kube.close()
        await runner.cleanup()


async def test_the_index_lists_again_after_gone(tmp_path: Path) -> None:
    runner, kube = await _serve(_watch_server(["gone"]), tmp_path)
    index = DecisionIndex()
    seen: list[str] = []
    relisted = asyncio.Event()

    def listener(task: Any) -> None:
        seen.append(task.metadata.name)
        if task.metadata.name == "b":
            relisted.set()

    index.subscribe(listener)
    running = asyncio.create_task(index.run(kube))
    try:
        await asyncio.wait_for(relisted.wait(), 60)
        # listed "a", the watch was Gone, listed again at once (no pause) and saw "b"
        assert seen[:2] == ["a", "b"]
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        await kube.close()
        await runner.cleanup()
