"""Fixtures of the real-node tests: a local control plane of their own (state in
`.cluster-node/`, not the `.cluster/` of the rest of the suite) with one real node beside
kwok (humanwork_dev.node), and pods pinned to that node.

A control plane of their own, so that the product they deploy in-cluster (an operator pod
reconciling every AgentInstance, the platform API in humanwork-system) never meets the
operator process and the resources the kwok tests run on the suite's cluster, and the
kwok tests never see the real node. Both run in the same `make test` session.

These tests need root (containerd, iptables, network namespaces) and the node's binaries
and images (`make node-binaries images`, which `make test` builds first). When the node
cannot be had they FAIL with the reason."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import config

from humanwork_dev import cluster as local
from humanwork_dev import incluster, node
from tests.conftest import Cluster

RESTRICTED = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}


NODE_STATE = Path(os.environ.get("HUMANWORK_NODE_CLUSTER_DIR", local.REPO / ".cluster-node"))
"""The real-node tests' own control plane (its node's state is under `node/`)."""


@pytest.fixture(scope="package")
def cluster() -> Iterator[Cluster]:
    """Overrides the root `cluster` for tests/node: the local control plane at NODE_STATE
    (reused when running, started otherwise). Package-scoped: the node and its control
    plane stop when the last test of tests/node is done, not at the end of `make test`,
    so they take no CPU from the rest of the suite."""
    try:
        info = local.status(NODE_STATE)
        started_here = info is None
        info = info or local.up(NODE_STATE)
    except local.ClusterError as exc:
        pytest.fail(f"no control plane for the real-node tests: {exc}", pytrace=False)
    api = config.new_client_from_config(config_file=info.kubeconfig)
    yield Cluster(info.kubeconfig, info.kubectl, True, api, info)
    api.close()
    if started_here and not os.environ.get("HUMANWORK_KEEP_CLUSTER"):
        node.down(NODE_STATE)
        local.down(NODE_STATE)


@pytest.fixture(scope="package")
def real_node(cluster: Cluster) -> dict[str, Any]:
    try:
        return node.up(NODE_STATE)
    except node.NodeError as exc:
        pytest.fail(f"no real node: {exc}", pytrace=False)


def pod_manifest(name: str, image: str, command: list[str] | None = None,
                 labels: dict[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    """A pod on the real node under the `restricted` Pod Security profile."""
    container: dict[str, Any] = {
        "name": "main",
        "image": image,
        "imagePullPolicy": "Never",
        "securityContext": RESTRICTED,
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"},
                      "limits": {"memory": "128Mi"}},
    }  # fmt: skip
    if command:
        container["command"] = command
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {"app": name}},
        "spec": {
            "nodeSelector": {node.LABEL[0]: node.LABEL[1]},
            "tolerations": [{"key": node.TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}],
            "securityContext": {"runAsNonRoot": True, "runAsUser": 10001, "runAsGroup": 10001,
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "terminationGracePeriodSeconds": 1,
            "containers": [container],
        },
    }  # fmt: skip


@pytest.fixture
def restricted_namespace(
    cluster: Cluster, real_node: dict[str, Any], make_namespace: Callable[..., str]
) -> Callable[[str], str]:
    def make(prefix: str) -> str:
        return make_namespace(prefix, labels={"pod-security.kubernetes.io/enforce": "restricted"})

    return make


@pytest.fixture
def run_pod(cluster: Cluster) -> Iterator[Callable[..., dict[str, Any]]]:
    """Create a pod and wait until it is Running and Ready; returns its status."""
    created: list[tuple[str, str]] = []

    def run(namespace: str, manifest: dict[str, Any], timeout: float = 120.0) -> dict[str, Any]:
        cluster.kubectl("-n", namespace, "apply", "-f", "-", stdin=json.dumps(manifest))
        name = manifest["metadata"]["name"]
        created.append((namespace, name))
        deadline = time.monotonic() + timeout
        doc: dict[str, Any] = {}
        while time.monotonic() < deadline:
            doc = json.loads(
                cluster.kubectl("-n", namespace, "get", "pod", name, "-o", "json").stdout
            )
            conds = {c["type"]: c["status"] for c in doc["status"].get("conditions", [])}
            if doc["status"].get("phase") == "Running" and conds.get("Ready") == "True":
                return doc
            time.sleep(0.5)
        events = cluster.kubectl("-n", namespace, "get", "events", check=False).stdout
        raise AssertionError(f"pod {namespace}/{name} not Ready: {doc.get('status')}\n{events}")

    yield run
    for namespace, name in created:
        cluster.kubectl("-n", namespace, "delete", "pod", name, "--wait=false", check=False)


def container_pid(pod: dict[str, Any]) -> int:
    """The host PID of a pod's first container (containerd's task)."""
    return incluster.container_pid(NODE_STATE, pod)


def connects(pid: int | None, host: str, port: int, timeout: float = 2.0) -> bool:
    """Whether a TCP connection from the network namespace of `pid` (None: the host's)
    to host:port opens."""
    code = (
        "import socket,sys\n"
        f"try: socket.create_connection(({host!r},{port}),timeout={timeout}).close()\n"
        "except OSError: sys.exit(1)\n"
    )
    enter = ["nsenter", "-t", str(pid), "-n"] if pid else []
    done = subprocess.run([*enter, sys.executable, "-c", code],
                          capture_output=True, check=False, timeout=timeout + 10)  # fmt: skip
    return done.returncode == 0


def eventually(check: Callable[[], bool], timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.5)
    return False


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"
