"""Benchmark: restricted pods on the real node — create-to-Ready over N pods
one after another, and how many agents the node holds at the operator's default requests.

Needs a running control plane and real node (`make node-up`, root); not part of
`make bench`. Each pod is the agent image serving HTTP (a real container with the
restricted profile, the agent's image and interpreter; not the agent runtime itself).
It asserts nothing.

    .venv/bin/python bench/real_node/pods.py [--pods 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
import uuid
from typing import Any

from agent_operator.config import OperatorSettings
from humanwork_dev import cluster, node


def _kubectl(info: cluster.ClusterInfo, *args: str, stdin: str | None = None) -> str:
    return subprocess.run(
        [info.kubectl, "--kubeconfig", info.kubeconfig, *args],
        input=stdin, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip


def _pod(name: str) -> dict[str, Any]:
    restricted = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                  "capabilities": {"drop": ["ALL"]}}  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {node.LABEL[0]: node.LABEL[1]},
            "tolerations": [{"key": node.TAINT_KEY, "operator": "Exists"}],
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 10001,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "main",
                    "image": "humanwork/agent:0.1.0",
                    "imagePullPolicy": "Never",
                    "command": ["python", "-m", "http.server", "8080"],
                    "securityContext": restricted,
                    "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 1},
                }
            ],
        },
    }


def _ready(info: cluster.ClusterInfo, ns: str, name: str) -> bool:
    doc = json.loads(_kubectl(info, "-n", ns, "get", "pod", name, "-o", "json"))
    conds = {c["type"]: c["status"] for c in doc["status"].get("conditions", [])}
    return conds.get("Ready") == "True"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=int, default=20)
    args = parser.parse_args()
    info = cluster.status()
    if not info or not node.status():
        raise SystemExit("no real node: `make node-up` first")
    ns = f"bench-{uuid.uuid4().hex[:6]}"
    _kubectl(info, "create", "namespace", ns)
    _kubectl(info, "label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted")
    seconds = []
    try:
        for i in range(args.pods):
            started = time.monotonic()
            _kubectl(info, "-n", ns, "apply", "-f", "-", stdin=json.dumps(_pod(f"p{i}")))
            while not _ready(info, ns, f"p{i}"):
                time.sleep(0.1)
            seconds.append(time.monotonic() - started)
    finally:
        _kubectl(info, "delete", "namespace", ns, "--wait=false")
    q = statistics.quantiles(seconds, n=20)
    print(f"create-to-Ready over {len(seconds)} pods: p50 {statistics.median(seconds):.2f}s "
          f"p95 {q[18]:.2f}s max {max(seconds):.2f}s")  # fmt: skip
    settings = OperatorSettings()
    alloc = json.loads(_kubectl(info, "get", "node", node.NODE_NAME, "-o", "json"))["status"][
        "allocatable"
    ]
    cpu = int(alloc["cpu"]) * 1000 // int(settings.default_cpu_request.rstrip("m"))
    mem = int(alloc["memory"].rstrip("Ki")) // (int(settings.default_memory_request[:-2]) * 1024)
    print(f"agents the node holds at the default requests ({settings.default_cpu_request} CPU, "
          f"{settings.default_memory_request}): {min(cpu, mem, int(alloc['pods']))} "
          f"(cpu {cpu}, memory {mem}, pods {alloc['pods']})")  # fmt: skip


if __name__ == "__main__":
    main()
