"""Benchmark: how fast the operator provisions orgs, and what it costs.

On a scratch local control plane (its own state folder, so a running dev cluster is left
alone) with the CRDs, policies and the operator's RBAC installed, the operator runs as a
process under its own ServiceAccount. Then:

1. burst: N AgentInstances (default 200), each in its own org namespace, created at once
   (16 client threads); prints orgs per second to Ready and create-to-Ready p50/p95/p99;
2. steady: M more (default 200) at a steady RATE per second (default 20); same figures;
3. API writes per org (the operator's own client, and all clients of the API server),
   and the operator's resident memory; then grows to TOTAL orgs (default 1000) and prints
   the memory there.

Run by hand or with `make bench`; it prints and asserts nothing.

    .venv/bin/python bench/provision.py [--burst 200] [--steady 200] [--rate 20] [--total 1000]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kubernetes import client, config, watch

from humanwork_dev import cluster
from humanwork_dev.processes import OperatorProcess

REPO = Path(__file__).resolve().parents[1]
GROUP, VERSION, PLURAL = "humanwork.io", "v1alpha1", "agentinstances"


class ReadyWatch:
    """Records when each AgentInstance first reports phase Ready."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.ready: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        objects = client.CustomObjectsApi(self.api)
        while not self._stop.is_set():
            w = watch.Watch()
            try:
                for event in w.stream(
                    objects.list_cluster_custom_object, GROUP, VERSION, PLURAL, timeout_seconds=30
                ):
                    obj = event["object"]
                    key = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
                    if (obj.get("status") or {}).get("phase") == "Ready":
                        self.ready.setdefault(key, time.monotonic())
                    if self._stop.is_set():
                        break
            except Exception:  # a dropped watch is simply restarted
                time.sleep(0.2)

    def stop(self) -> None:
        self._stop.set()


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _org(core: client.CoreV1Api, prefix: str, i: int) -> tuple[str, str]:
    org_id = str(uuid.uuid4())
    ns = f"{prefix}-{i:04d}"
    core.create_namespace(
        client.V1Namespace(
            metadata=client.V1ObjectMeta(
                name=ns,
                labels={
                    "humanwork.io/org-id": org_id,
                    "pod-security.kubernetes.io/enforce": "restricted",
                },
            )
        )
    )
    return ns, org_id


def _instance(ns: str, org_id: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "AgentInstance",
        "metadata": {"name": "agent", "namespace": ns},
        "spec": {
            "orgId": org_id,
            "specialist": {"name": "Bob", "systemPrompt": "You reconcile orders."},
            "model": "openai/gpt-4o",
            "llm": {
                "baseURL": "https://llm.example/v1",
                "apiKeySecretRef": {"name": "llm", "key": "api-key"},
            },
        },
    }


def _wait_all(ready: ReadyWatch, keys: list[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not all(k in ready.ready for k in keys):
        time.sleep(0.1)


def _report(label: str, created: dict[str, float], ready: ReadyWatch) -> None:
    latencies = [ready.ready[k] - t for k, t in created.items() if k in ready.ready]
    missing = len(created) - len(latencies)
    if not latencies:
        print(f"{label}: no instance became Ready")
        return
    first = min(created.values())
    last = max(ready.ready[k] for k in created if k in ready.ready)
    print(
        f"{label}: {len(latencies)} orgs Ready in {last - first:.1f}s = "
        f"{len(latencies) / (last - first):.1f} orgs/s; create-to-Ready "
        f"p50 {_percentile(latencies, 0.5):.2f}s p95 {_percentile(latencies, 0.95):.2f}s "
        f"p99 {_percentile(latencies, 0.99):.2f}s" + (f"; {missing} NOT Ready" if missing else "")
    )


def _apiserver_writes(info: cluster.ClusterInfo) -> float:
    """Writes the API server has served so far, all clients together."""
    with cluster.admin_http(Path(info.state_dir)) as http:
        text = http.get(f"{info.server}/metrics").text
    total = 0.0
    for line in text.splitlines():
        if line.startswith("apiserver_request_total{") and any(
            f'verb="{v}"' in line for v in ("POST", "PATCH", "PUT", "DELETE", "APPLY")
        ):
            total += float(line.rsplit(" ", 1)[1])
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--burst", type=int, default=200)
    parser.add_argument("--steady", type=int, default=200)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--total", type=int, default=1000)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="hw-bench-provision-") as tmp:
        state = Path(tmp) / "cluster"
        info = cluster.up(state)
        try:
            _run(args, info, Path(tmp))
        finally:
            cluster.down(state)


def _run(args: argparse.Namespace, info: cluster.ClusterInfo, tmp: Path) -> None:
    import subprocess

    def kubectl(*a: str) -> None:
        subprocess.run(
            [info.kubectl, "--kubeconfig", info.kubeconfig, *a], check=True, capture_output=True
        )

    kubectl("apply", "-k", str(REPO / "crds"))
    kubectl("wait", "--for=condition=Established", "crd/agentinstances.humanwork.io")
    kubectl("apply", "-k", str(REPO / "manifests/base/policies"))
    kubectl("apply", "-k", str(REPO / "manifests/base/operator"))
    time.sleep(2)  # let the admission policies become active

    api = config.new_client_from_config(config_file=info.kubeconfig)
    api.configuration.connection_pool_maxsize = 32
    core, objects = client.CoreV1Api(api), client.CustomObjectsApi(api)
    operator = OperatorProcess(info.kubeconfig, info.kubectl, tmp / "operator")
    operator.start()
    print(f"operator started, RSS {operator.rss_bytes() / 2**20:.0f} MiB with no orgs")
    ready = ReadyWatch(api)

    def prepare(prefix: str, count: int, start: int = 0) -> list[tuple[str, str]]:
        with ThreadPoolExecutor(16) as pool:
            orgs = list(pool.map(lambda i: _org(core, prefix, i), range(start, start + count)))
        for ns, _ in orgs:
            core.create_namespaced_secret(
                ns,
                client.V1Secret(
                    metadata=client.V1ObjectMeta(name="llm"), string_data={"api-key": "sk-bench"}
                ),
            )
        return orgs

    def create(ns: str, org_id: str, created: dict[str, float]) -> None:
        created[f"{ns}/agent"] = time.monotonic()
        objects.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, _instance(ns, org_id))

    # 1. burst
    orgs = prepare("burst", args.burst)
    ops_before = operator.metric("humanwork_operator_api_requests_total")
    writes_before = _apiserver_writes(info)
    own_writes_before = sum(
        operator.metric("humanwork_operator_api_requests_total", method=m)
        for m in ("PATCH", "POST", "PUT", "DELETE")
    )
    burst: dict[str, float] = {}
    cpu_before = {name: _cpu_seconds(pid) for name, pid in info.pids.items()}
    cpu_before["operator"] = _cpu_seconds(operator.pid)
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda o: create(o[0], o[1], burst), orgs))
    _wait_all(ready, list(burst), timeout=600)
    _report(f"burst of {args.burst}", burst, ready)
    time.sleep(3)  # let trailing reconciles (readiness events) settle
    own_writes = (
        sum(
            operator.metric("humanwork_operator_api_requests_total", method=m)
            for m in ("PATCH", "POST", "PUT", "DELETE")
        )
        - own_writes_before
    )
    all_requests = operator.metric("humanwork_operator_api_requests_total") - ops_before
    writes = _apiserver_writes(info) - writes_before
    print(
        f"API per org: operator's own client {own_writes / args.burst:.1f} writes "
        f"({all_requests / args.burst:.1f} requests); all API server writes (controllers, "
        f"scheduler, kwok, kopf included) {writes / args.burst:.1f}"
    )
    print(f"operator RSS at {args.burst} orgs: {operator.rss_bytes() / 2**20:.0f} MiB")
    pids = {**info.pids, "operator": operator.pid}
    print(
        "CPU seconds per org during the burst: "
        + ", ".join(
            f"{name} {(_cpu_seconds(pid) - cpu_before[name]) / args.burst * 1000:.0f} ms"
            for name, pid in pids.items()
        )
    )

    # 2. steady rate
    orgs = prepare("steady", args.steady)
    steady: dict[str, float] = {}
    interval = 1.0 / args.rate
    t0 = time.monotonic()
    with ThreadPoolExecutor(16) as pool:
        for i, (ns, org_id) in enumerate(orgs):
            delay = t0 + i * interval - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            pool.submit(create, ns, org_id, steady)
    _wait_all(ready, list(steady), timeout=600)
    _report(f"steady {args.rate:g}/s, {args.steady} orgs", steady, ready)

    # 3. memory at TOTAL orgs
    have = args.burst + args.steady
    if args.total > have:
        orgs = prepare("grow", args.total - have)
        grown: dict[str, float] = {}
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda o: create(o[0], o[1], grown), orgs))
        _wait_all(ready, list(grown), timeout=900)
        _report(f"growing to {args.total}", grown, ready)
        time.sleep(5)
    print(f"operator RSS at {len(ready.ready)} Ready orgs: {operator.rss_bytes() / 2**20:.0f} MiB")
    ready.stop()
    operator.stop()


if __name__ == "__main__":
    main()
