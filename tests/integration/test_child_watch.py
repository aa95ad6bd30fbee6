"""The operator's own Deployment watch on the real API server: it is given this shard's
managed Deployments alone (another shard's, and the default shard's, never reach it),
and it watches on from the last version when the API server ends its stream."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

from kubernetes import client

from agent_operator.child_watch import ChildWatch, deployment_selector
from agent_operator.kube import Kube
from humanwork_core import kube_credentials
from tests.conftest import Cluster

SHARD_LABEL = "humanwork.io/shard"
MANAGED = {
    "app.kubernetes.io/managed-by": "humanwork-operator",
    "app.kubernetes.io/component": "agent",
}


def create_deployment(cluster: Cluster, ns: str, name: str, labels: dict[str, str]) -> None:
    """A Deployment of no replicas (no pod needed) with `labels`."""
    pods = {"app": name}
    client.AppsV1Api(cluster.api).create_namespaced_deployment(
        ns,
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "labels": labels},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": pods},
                "template": {
                    "metadata": {"labels": pods},
                    "spec": {"containers": [{"name": "c", "image": "example.invalid/agent"}]},
                },
            },
        },
    )


async def test_the_watch_sees_its_shards_deployments_alone_across_ended_streams(
    cluster: Cluster, make_namespace: Callable[..., str]
) -> None:
    shard = f"watch-{uuid.uuid4().hex[:6]}"
    ns = make_namespace("watch")
    watches: list[str] = []
    kube = Kube.open(
        kube_credentials.load(cluster.kubeconfig),
        field_manager="test",
        user_agent="test",
        connections=4,
        on_request=lambda method, _path: watches.append(method) if method == "WATCH" else None,
    )
    seen: dict[str, list[str]] = {}
    ours_seen = asyncio.Event()

    async def handle(kind: str, body: dict[str, Any]) -> None:
        seen.setdefault(body["metadata"]["name"], []).append(kind)
        if body["metadata"]["name"] == "ours":
            ours_seen.set()

    # the API server ends each stream after a second
    watch = ChildWatch(
        kube, "apps/v1", "Deployment", deployment_selector(shard), handle, server_timeout=1
    )
    watch.start()
    try:
        await asyncio.wait_for(watch.listed.wait(), timeout=30)
        for _ in range(300):  # until the first stream has ended and the next one runs
            if len(watches) >= 2:
                break
            await asyncio.sleep(0.1)
        assert len(watches) >= 2
        # created before ours, so they would reach the watch first if they matched
        await asyncio.to_thread(
            create_deployment, cluster, ns, "theirs", {**MANAGED, SHARD_LABEL: "another"}
        )
        await asyncio.to_thread(create_deployment, cluster, ns, "default", MANAGED)
        await asyncio.to_thread(create_deployment, cluster, ns, "unmanaged", {SHARD_LABEL: shard})
        await asyncio.to_thread(
            create_deployment, cluster, ns, "ours", {**MANAGED, SHARD_LABEL: shard}
        )
        await asyncio.wait_for(ours_seen.wait(), timeout=30)
    finally:
        await watch.stop()
        await kube.close()
    assert seen["ours"][0] == "ADDED"  # the positive control
    assert set(seen) == {"ours"}
    assert watch.listings == 1  # each ended stream resumed from its version, no new listing
