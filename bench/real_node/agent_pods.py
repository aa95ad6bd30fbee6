"""Benchmark: an agent pod's create-to-Ready on the real node, beside a bare pod of the same
image on the same node in the same run, cold and warm.

Runs the product in-cluster (humanwork_dev.incluster: the chart's release with the node's
values, the fakes) on the control plane of the real-node tests (`.cluster-node/`, started
and given a real node when not running; root). For each round it makes an org through the
platform, then times, from the client's apply:
- agent: an AgentInstance until its agent pod is Ready, and until the instance reports
  phase `Ready` (the operator's children, the pod scheduled, started and probed, the
  status written);
- bare: a pod of the agent's image (`python -m http.server`, the restricted profile, the
  same readiness probe's timing as the agent's, an HTTP GET) until Ready, in a namespace
  of its own: the floor the node, the kubelet and the probe set.
A third kind, the bare pod probed every second from its start, shows what the probe's
timing adds. The first round of agent and bare is cold: the agent image removed from the
node's containerd and imported again from its archive (what a pull costs, less the
network) and the kernel's page cache dropped; the other rounds are warm and alternate the
three. Each round's
instance (or pod) is deleted, and gone, before the next. It asserts nothing and leaves the
control plane running (`HUMANWORK_CLUSTER_DIR=.cluster-node .venv/bin/humanwork-node down`
and `... humanwork-cluster down` stop it). Hold `/tmp/humanwork-realnode.lock` while it runs.

    .venv/bin/python bench/real_node/agent_pods.py [--rounds 8]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from humanwork_dev import cluster, incluster, node

STATE = cluster.REPO / ".cluster-node"
AGENT_LABEL = "app.kubernetes.io/name=humanwork-agent"
IMAGE = "humanwork/agent:0.1.0"
POLL = 0.1
QUICK_PROBE = {"initialDelaySeconds": 0, "periodSeconds": 1, "timeoutSeconds": 1}
"""The bare pod's second probe: what the node, the kubelet and the image cost with the
probe's wait taken out."""


def _until(check: Callable[[], bool], timeout: float = 240.0) -> None:
    """Return once `check()` holds, polled every POLL seconds."""
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"not within {timeout:.0f}s")
        time.sleep(POLL)


def _pods_ready(kubectl: incluster.Kubectl, namespace: str, selector: str) -> bool:
    pods = kubectl.json("-n", namespace, "get", "pods", "-l", selector)["items"]
    return any(
        c["type"] == "Ready" and c["status"] == "True"
        for p in pods
        if not p["metadata"].get("deletionTimestamp")
        for c in p["status"].get("conditions", [])
    )


def _phase(kubectl: incluster.Kubectl, namespace: str) -> str:
    doc = kubectl.json("-n", namespace, "get", "agentinstance", "agent")
    return str(doc.get("status", {}).get("phase", ""))


def _bare_pod(name: str, probe: dict[str, Any]) -> dict[str, Any]:
    restricted = {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "runAsUser": 10001,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    timing = {k: probe[k] for k in ("initialDelaySeconds", "periodSeconds", "timeoutSeconds")}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"bench": "bare"}},
        "spec": {
            **incluster.agent_scheduling(),
            "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "main", "image": IMAGE, "imagePullPolicy": "Never",
                "command": ["python", "-m", "http.server", "8080"],
                "securityContext": restricted,
                "readinessProbe": {"httpGet": {"path": "/", "port": 8080}, **timing},
            }],
        },
    }  # fmt: skip


def _cold(state: Path) -> float:
    """Remove the agent image from the node and import it again; drop the page cache.
    Returns the import's seconds."""
    d = node.node_dir(state)
    for ref in node._ctr(d, "images", "ls", "-q").stdout.split():
        if ref.endswith(IMAGE):
            node._ctr(d, "images", "rm", ref)
    started = time.monotonic()
    node.import_images(state, [node.CACHE / "images" / "archives" / "agent.tar"])
    took = time.monotonic() - started
    subprocess.run(["sync"], check=True)
    Path("/proc/sys/vm/drop_caches").write_text("3\n")
    return took


class Rounds:
    """One run's rounds: the platform's client, the orgs it makes, the bare namespace."""

    def __init__(self, kubectl: incluster.Kubectl, http: httpx.Client, deployed: Any) -> None:
        self.kubectl, self.http, self.deployed = kubectl, http, deployed
        self.bare_ns = f"bench-bare-{uuid.uuid4().hex[:6]}"
        kubectl("create", "namespace", self.bare_ns)
        kubectl("label", "namespace", self.bare_ns, "pod-security.kubernetes.io/enforce=restricted")
        self.probe: dict[str, Any] = {"initialDelaySeconds": 2, "periodSeconds": 5,
                                      "timeoutSeconds": 2}  # fmt: skip
        self.namespaces: list[str] = [self.bare_ns]

    def agent(self) -> dict[str, float]:
        org = incluster.create_org(self.http, f"pods-{uuid.uuid4().hex[:6]}",
                                   self.deployed.credentials, users=())  # fmt: skip
        self.namespaces.append(org.namespace)
        self.kubectl("-n", org.namespace, "create", "secret", "generic", "llm",
                     "--from-literal=api-key=none")  # fmt: skip
        instance = incluster.agent_instance(org)
        started = time.monotonic()
        self.kubectl("apply", "-f", "-", stdin=json.dumps(instance))
        _until(lambda: _pods_ready(self.kubectl, org.namespace, AGENT_LABEL))
        pod = time.monotonic() - started
        _until(lambda: _phase(self.kubectl, org.namespace) == "Ready")
        ready = time.monotonic() - started
        pods = self.kubectl.json("-n", org.namespace, "get", "pods", "-l", AGENT_LABEL)
        self.probe = pods["items"][0]["spec"]["containers"][0]["readinessProbe"]
        self.kubectl("-n", org.namespace, "delete", "agentinstance", "agent", "--wait=true")
        _until(lambda: not self.kubectl.json("-n", org.namespace, "get", "pods")["items"])
        return {"pod_ready": pod, "instance_ready": ready}

    def bare(self, i: int, probe: dict[str, Any] | None = None) -> dict[str, float]:
        name = f"bare-{i}"
        started = time.monotonic()
        self.kubectl("-n", self.bare_ns, "apply", "-f", "-",
                     stdin=json.dumps(_bare_pod(name, probe or self.probe)))  # fmt: skip
        _until(lambda: _pods_ready(self.kubectl, self.bare_ns, "bench=bare"))
        pod = time.monotonic() - started
        self.kubectl("-n", self.bare_ns, "delete", "pod", name, "--wait=true")
        return {"pod_ready": pod}


def _summary(samples: list[float]) -> str:
    if len(samples) < 2:
        return f"{samples[0]:.2f}s" if samples else "-"
    q = statistics.quantiles(samples, n=20, method="inclusive")
    return f"p50 {statistics.median(samples):.2f}s p95 {q[18]:.2f}s (n={len(samples)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=8, help="warm rounds of each")
    parser.add_argument("--state-dir", type=Path, default=STATE)
    args = parser.parse_args()
    info = cluster.up(args.state_dir)
    node.up(args.state_dir)
    kubectl = incluster.Kubectl(info.kubectl, info.kubeconfig)
    deployed = incluster.deploy(kubectl)
    load = [os.getloadavg()[0]]
    with httpx.Client(base_url=deployed.platform_url, timeout=120,
                      verify=deployed.verify()) as http:  # fmt: skip
        rounds = Rounds(kubectl, http, deployed)
        try:
            imports = [_cold(args.state_dir)]
            cold_agent = rounds.agent()
            imports.append(_cold(args.state_dir))
            cold_bare = rounds.bare(0)
            warm_agent, warm_bare, quick_bare = [], [], []
            for i in range(args.rounds):
                warm_agent.append(rounds.agent())
                warm_bare.append(rounds.bare(2 * i + 1))
                quick_bare.append(rounds.bare(2 * i + 2, QUICK_PROBE))
                load.append(os.getloadavg()[0])
        finally:
            for ns in rounds.namespaces:
                kubectl("delete", "namespace", ns, "--wait=false", check=False)
    probe = {k: rounds.probe.get(k) for k in ("initialDelaySeconds", "periodSeconds")}
    print(f"readiness probe of the agent (and of the bare pod): {probe}")
    print(f"image import into the node's containerd: {', '.join(f'{s:.2f}s' for s in imports)}")
    print(
        f"cold  agent pod Ready {cold_agent['pod_ready']:.2f}s, instance Ready "
        f"{cold_agent['instance_ready']:.2f}s; bare pod Ready {cold_bare['pod_ready']:.2f}s"
    )
    for label, key in (("agent pod Ready", "pod_ready"), ("instance Ready", "instance_ready")):
        print(f"warm  {label}: {_summary([r[key] for r in warm_agent])}")
    print(f"warm  bare pod Ready: {_summary([r['pod_ready'] for r in warm_bare])}")
    print(f"warm  bare pod Ready, probed every second from the start {QUICK_PROBE}: "
          f"{_summary([r['pod_ready'] for r in quick_bare])}")  # fmt: skip
    ratio = statistics.median(r["pod_ready"] for r in warm_agent) / statistics.median(
        r["pod_ready"] for r in warm_bare
    )
    print(f"agent pod / bare pod (warm medians): {ratio:.2f}; load average "
          f"{min(load):.1f} to {max(load):.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
