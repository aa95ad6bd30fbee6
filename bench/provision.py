"""Benchmark: how fast the operator provisions orgs, held against a plain client's ceiling.

On a scratch local control plane (its own state folder, so a running dev cluster is left
alone) with the CRDs, policies and the operator's RBAC installed, the operator runs as a
process under its own ServiceAccount. Then, in one run:

1. operator: ORGS AgentInstances (default 200), each in its own fresh org namespace, created
   at once (16 client threads); orgs per second to Ready, create-to-Ready p50/p95/p99, the
   operator's API requests and writes per org, CPU per org of every process;
2. plain client (the ceiling, `bench/plain_provision.py`): ORGS more fresh orgs, whose
   namespaces belong to another shard (the operator drops their events), provisioned by 16
   threads of a plain HTTP client as the operator's ServiceAccount: the same children from
   the operator's own builders, server-side applied, and the status written once the
   agent's pod is Ready; the same figures, and the ratio operator / plain;
3. optionally (`--steady M --rate R`) M more orgs through the operator at R per second,
   then M through a plain client at the same rate: create-to-Ready of each when arrivals
   are paced (under capacity, it is service time) rather than a burst;
4. memory: the operator's resident memory idle, at ORGS orgs, and (`--others K`) after K
   orgs of another shard (namespace with that shard's label + AgentInstance, no operator of
   theirs running) were created in bulk on the same control plane: what a shard pays for
   the orgs it does not serve.

Each figure is printed with the load average at that moment (the machine may be shared).
Run by hand or with `make bench`; it prints and asserts nothing.

    .venv/bin/python bench/provision.py [--orgs 200] [--others 0] [--steady 0 --rate 20]

Where the memory goes: `--snapshots` with the hook of bench/heap_hook writes, at each
point, what tracemalloc sees live in the operator (see bench/heap_hook/sitecustomize.py).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _kit import GROUP, INSTANCES, REPO, VERSION, agent_instance
from kubernetes import client, config, watch
from plain_provision import PlainClient

from humanwork_core.keys import RESTRICTED_NAMESPACE_LABELS
from humanwork_dev import cluster, crdwait
from humanwork_dev.processes import OperatorProcess

SHARD_LABEL = "humanwork.io/shard"
PLAIN_SHARD = "plain"
"""The plain client's orgs' shard (no operator of it runs)."""
REQUESTS = "humanwork_operator_api_requests_total"
WRITE_VERBS = ("PATCH", "POST", "PUT", "DELETE")


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
                    objects.list_cluster_custom_object,
                    GROUP,
                    VERSION,
                    INSTANCES,
                    timeout_seconds=30,
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


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"[load {one:.2f} / {five:.2f}]"


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _namespace(core: client.CoreV1Api, ns: str, shard: str) -> str:
    org_id = str(uuid.uuid4())
    # labelled as the platform creates an org namespace (its org, the Pod Security labels)
    labels = {"humanwork.io/org-id": org_id, **RESTRICTED_NAMESPACE_LABELS}
    if shard:
        labels[SHARD_LABEL] = shard
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns, labels=labels)))
    return org_id


def _wait_all(ready: dict[str, float], keys: list[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not all(k in ready for k in keys):
        time.sleep(0.1)


def _rate(label: str, created: dict[str, float], ready: dict[str, float]) -> float:
    """Print orgs/s and the create-to-Ready percentiles; the rate (0 when none was Ready)."""
    latencies = [ready[k] - t for k, t in created.items() if k in ready]
    missing = len(created) - len(latencies)
    if not latencies:
        print(f"{label}: no instance became Ready {_load()}")
        return 0.0
    first = min(created.values())
    last = max(ready[k] for k in created if k in ready)
    rate = len(latencies) / (last - first)
    print(
        f"{label}: {len(latencies)} orgs Ready in {last - first:.1f}s = {rate:.1f} orgs/s; "
        f"create-to-Ready p50 {_percentile(latencies, 0.5):.2f}s "
        f"p95 {_percentile(latencies, 0.95):.2f}s p99 {_percentile(latencies, 0.99):.2f}s"
        + (f"; {missing} NOT Ready" if missing else "")
        + f" {_load()}"
    )
    return rate


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


class CpuMeter:
    """CPU seconds each process (the control plane's, the operator, this process) spent
    between `start` and `per_org`."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = {**pids, "load generator (this process)": os.getpid()}
        self.before: dict[str, float] = {}

    def start(self) -> None:
        self.before = {name: _cpu_seconds(pid) for name, pid in self.pids.items()}

    def per_org(self, orgs: int) -> dict[str, float]:
        return {
            name: (_cpu_seconds(pid) - self.before[name]) / orgs * 1000
            for name, pid in self.pids.items()
        }


def _print_cpu(label: str, cpu: dict[str, float]) -> None:
    print(
        f"CPU per org, {label}: "
        + ", ".join(f"{name} {ms:.0f} ms" for name, ms in cpu.items())
        + f" {_load()}"
    )


def _quiet(operator: OperatorProcess) -> None:
    """Wait until the operator has gone quiet (under 5 % of a core for 10 s), so its
    resident memory is what it keeps rather than a burst's peak."""
    before = _cpu_seconds(operator.pid)
    while True:
        time.sleep(10)
        now = _cpu_seconds(operator.pid)
        if now - before < 0.5:
            return
        before = now


def _requests_by(operator: OperatorProcess) -> dict[str, float]:
    """The operator's API requests so far, by "METHOD resource"."""
    counts: dict[str, float] = {}
    for line in operator.metrics().splitlines():
        if not line.startswith(REQUESTS + "{"):
            continue
        head, _, value = line.rpartition(" ")
        labels = {
            name: value.strip('"')
            for name, _, value in (
                part.partition("=") for part in head[len(REQUESTS) + 1 : -1].split(",")
            )
        }
        key = f"{labels.get('method', '?')} {labels.get('resource', '?')}"
        counts[key] = counts.get(key, 0.0) + float(value)
    return counts


def _print_requests(before: dict[str, float], after: dict[str, float], orgs: int) -> None:
    """Per org, which requests the operator made (method and resource)."""
    per_org = {key: (after[key] - before.get(key, 0.0)) / orgs for key in after}
    print(
        "operator requests per org: "
        + ", ".join(f"{key} {n:.2f}" for key, n in sorted(per_org.items()) if n >= 0.005)
    )


def _arrivals(created: dict[str, float]) -> list[float]:
    """Each org's creation, seconds after the first, in creation order."""
    first = min(created.values())
    return sorted(t - first for t in created.values())


def _same_arrivals(
    op_latency: list[float],
    created: dict[str, float],
    ready: dict[str, float],
    arrivals: list[float],
) -> None:
    """The plain client's create-to-Ready on the operator's basis: its i-th org (in
    creation order) counted from when the operator run's i-th org arrived after its burst
    began (or its own creation, if earlier), not from when a free thread of its own picked
    it up: the queueing its 16 threads did is counted as the operator's is."""
    first = min(created.values())
    order = sorted(created, key=created.__getitem__)
    queued = [
        ready[k] - min(created[k], first + arrival)
        for k, arrival in zip(order, arrivals, strict=False)
        if k in ready
    ]
    served = [ready[k] - created[k] for k in order if k in ready]
    if not queued:
        return
    op95, plain95 = _percentile(op_latency, 0.95), _percentile(queued, 0.95)
    print(
        "create-to-Ready p50 / p95 from the same arrivals (each org from its arrival in "
        f"the operator's burst): operator {_percentile(op_latency, 0.5):.2f}s / {op95:.2f}s, "
        f"plain client {_percentile(queued, 0.5):.2f}s / {plain95:.2f}s, p95 ratio "
        f"{op95 / plain95:.2f}; the plain client's service time (from its thread picking "
        f"the org) {_percentile(served, 0.5):.2f}s / {_percentile(served, 0.95):.2f}s, p95 "
        f"ratio {op95 / _percentile(served, 0.95):.2f}"
    )


def _mib(operator: OperatorProcess) -> str:
    return f"{operator.rss_bytes() / 2**20:.0f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--orgs", type=int, default=200, help="orgs per run (operator, plain)")
    parser.add_argument("--others", type=int, default=0, help="orgs of another shard, then")
    parser.add_argument("--steady", type=int, default=0)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument(
        "--operator-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="extra environment of the operator (repeatable), e.g. to profile it",
    )
    parser.add_argument(
        "--snapshots",
        action="store_true",
        help="send the operator SIGUSR1 idle, at ORGS orgs and after the others' orgs; "
        "bench/heap_hook answers it (--operator-env PYTHONPATH=bench/heap_hook "
        "--operator-env HUMANWORK_HEAP_DIR=DIR)",
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="hw-bench-provision-") as tmp:
        state = Path(tmp) / "cluster"
        info = cluster.up(state)
        try:
            Bench(args, info, Path(tmp)).run()
        finally:
            cluster.down(state)


@dataclass(frozen=True)
class OperatorFigures:
    """What the operator's run measured, to print beside the plain client's."""

    rate: float
    latency: list[float]
    arrivals: list[float]
    """Each org's creation, seconds after the burst began, in creation order."""
    requests: float
    writes: float
    all_writes: float
    cpu: dict[str, float]


class Bench:
    """One run: the control plane, the operator, the load generator's clients."""

    def __init__(self, args: argparse.Namespace, info: cluster.ClusterInfo, tmp: Path) -> None:
        self.args, self.info, self.tmp = args, info, tmp
        self.api = config.new_client_from_config(config_file=info.kubeconfig)
        self.api.configuration.connection_pool_maxsize = 64
        self.core = client.CoreV1Api(self.api)
        self.objects = client.CustomObjectsApi(self.api)
        # how long a run waits for its orgs to be Ready (a loaded machine needs long)
        self.wait_seconds = max(600.0, 1.5 * args.orgs)

    def kubectl(self, *a: str) -> None:
        subprocess.run(
            [self.info.kubectl, "--kubeconfig", self.info.kubeconfig, *a],
            check=True,
            capture_output=True,
        )

    def install(self) -> None:
        self.kubectl("apply", "-k", str(REPO / "crds"))
        crdwait.wait_established(self.info.kubectl, self.info.kubeconfig)
        self.kubectl("apply", "-k", str(REPO / "manifests/base/policies"))
        self.kubectl("apply", "-k", str(REPO / "manifests/base/operator"))
        time.sleep(2)  # let the admission policies become active

    def prepare(self, prefix: str, count: int, shard: str = "") -> list[tuple[str, str]]:
        """`count` fresh org namespaces (of `shard`), each with its LLM key Secret."""

        def one(i: int) -> tuple[str, str]:
            ns = f"{prefix}-{i:05d}"
            org_id = _namespace(self.core, ns, shard)
            secret = client.V1Secret(
                metadata=client.V1ObjectMeta(name="llm"), string_data={"api-key": "sk-bench"}
            )
            self.core.create_namespaced_secret(ns, secret)
            return ns, org_id

        with ThreadPoolExecutor(self.args.threads) as pool:
            return list(pool.map(one, range(count)))

    def create(self, ns: str, org_id: str, created: dict[str, float]) -> dict[str, Any]:
        created[f"{ns}/agent"] = time.monotonic()
        body: dict[str, Any] = self.objects.create_namespaced_custom_object(
            GROUP, VERSION, ns, INSTANCES, agent_instance(ns, org_id)
        )
        return body

    def burst(
        self, orgs: list[tuple[str, str]], then: Callable[[dict[str, Any]], None]
    ) -> dict[str, float]:
        created: dict[str, float] = {}
        with ThreadPoolExecutor(self.args.threads) as pool:
            list(pool.map(lambda o: then(self.create(o[0], o[1], created)), orgs))
        return created

    def run(self) -> None:
        self.install()
        env = dict(item.split("=", 1) for item in self.args.operator_env)
        operator = OperatorProcess(
            self.info.kubeconfig, self.info.kubectl, self.tmp / "operator", env=env
        )
        operator.start()
        _quiet(operator)
        print(f"operator RSS idle (no orgs): {_mib(operator)} {_load()}")
        self.snapshot(operator)
        ready = ReadyWatch(self.api)
        cpu = CpuMeter({**self.info.pids, "operator": operator.pid})
        n = self.args.orgs

        # 1. through the operator
        orgs = self.prepare("op", n)
        requests_before = operator.metric(REQUESTS)
        by_before = _requests_by(operator)
        writes_before = sum(operator.metric(REQUESTS, method=m) for m in WRITE_VERBS)
        all_writes_before = _apiserver_writes(self.info)
        cpu.start()
        created = self.burst(orgs, lambda body: None)
        _wait_all(ready.ready, list(created), timeout=self.wait_seconds)
        op_rate = _rate(f"operator, {n} orgs created at once", created, ready.ready)
        op_latency = sorted(ready.ready[k] - t for k, t in created.items() if k in ready.ready)
        arrivals = _arrivals(created)
        time.sleep(3)  # let trailing reconciles (readiness events) settle
        op_cpu = cpu.per_org(n)
        _quiet(operator)
        requests = (operator.metric(REQUESTS) - requests_before) / n
        _print_requests(by_before, _requests_by(operator), n)
        writes = (sum(operator.metric(REQUESTS, method=m) for m in WRITE_VERBS) - writes_before) / n
        all_writes = (_apiserver_writes(self.info) - all_writes_before) / n
        print(f"operator RSS at {n} orgs Ready: {_mib(operator)} {_load()}")
        self.snapshot(operator)

        # 2. the ceiling: a plain client, the same children, side by side
        self.beside_a_plain_client(
            operator,
            OperatorFigures(op_rate, op_latency, arrivals, requests, writes, all_writes, op_cpu),
        )

        # 3. steady rate, optional
        if self.args.steady:
            self.steady(ready, operator)

        # 4. what a shard pays for the other shards' orgs
        served = n + self.args.steady  # (the plain client's steady orgs are not the operator's)
        _quiet(operator)
        print(f"operator RSS at {served} orgs Ready: {_mib(operator)} {_load()}")
        if self.args.others:
            self.others(operator, served)
        ready.stop()
        operator.stop()

    def beside_a_plain_client(self, operator: OperatorProcess, op: OperatorFigures) -> None:
        """The same orgs provisioned by a plain client (the ceiling), and the two side by
        side."""
        n = self.args.orgs
        cpu = CpuMeter({**self.info.pids, "operator": operator.pid})
        plain = self.plain_client(operator)
        orgs = self.prepare("plain", n, shard=PLAIN_SHARD)
        cpu.start()
        created = self.burst(orgs, plain.provision)
        _wait_all(plain.ready, list(created), timeout=self.wait_seconds)
        plain_rate = _rate(f"plain client, {n} orgs created at once", created, plain.ready)
        plain_cpu = cpu.per_org(n)
        plain.stop()
        for failure in plain.failures[:5]:
            print(f"  plain client failure: {failure}")
        minimum = plain.writes / n

        print("--- side by side, same run ---")
        print(
            f"orgs/s to Ready: operator {op.rate:.1f}, plain client {plain_rate:.1f}, "
            f"ratio {op.rate / plain_rate if plain_rate else 0:.2f}"
        )
        if op.latency:
            print(f"operator create-to-Ready p99 {_percentile(op.latency, 0.99):.2f}s")
            _same_arrivals(op.latency, created, plain.ready, op.arrivals)
        print(
            f"API per org: operator {op.requests:.1f} requests ({op.writes:.1f} writes); minimum "
            f"{minimum:.1f} writes (the plain client's: children + status); ratio "
            f"{op.requests / max(minimum, 1):.2f} (writes {op.writes / max(minimum, 1):.2f}); "
            f"all API server writes per org during the operator's run {op.all_writes:.1f}"
        )
        _print_cpu("operator run", op.cpu)
        _print_cpu("plain run (the load generator is the plain client)", plain_cpu)

    def plain_client(self, operator: OperatorProcess) -> PlainClient:
        import yaml

        doc = yaml.safe_load(Path(operator.kubeconfig).read_text())
        token = doc["users"][0]["user"]["token"]
        ca = Path(self.info.state_dir) / "pki" / "ca.crt"
        plain = PlainClient(self.info.server, ca, token, self.args.threads, PLAIN_SHARD)
        plain.start()
        return plain

    def steady(self, ready: ReadyWatch, operator: OperatorProcess) -> None:
        """Orgs arriving at `--rate` per second, not all at once: through the operator,
        then through a plain client at the same rate; create-to-Ready of both (a rate
        under both capacities makes it service time, no queueing)."""
        n, rate = self.args.steady, self.args.rate
        created = self.paced(self.prepare("steady", n), lambda body: None)
        _wait_all(ready.ready, list(created), timeout=self.wait_seconds)
        _rate(f"operator, steady {rate:g}/s, {n} orgs", created, ready.ready)
        plain = self.plain_client(operator)
        plain_orgs = self.prepare("steady-plain", n, shard=PLAIN_SHARD)
        plain_created = self.paced(plain_orgs, plain.provision)
        _wait_all(plain.ready, list(plain_created), timeout=self.wait_seconds)
        _rate(f"plain client, steady {rate:g}/s, {n} orgs", plain_created, plain.ready)
        plain.stop()
        op = [ready.ready[k] - t for k, t in created.items() if k in ready.ready]
        other = [plain.ready[k] - t for k, t in plain_created.items() if k in plain.ready]
        if op and other:
            op95, plain95 = _percentile(op, 0.95), _percentile(other, 0.95)
            print(
                f"steady {rate:g}/s create-to-Ready p95: operator {op95:.2f}s, plain client "
                f"{plain95:.2f}s, ratio {op95 / plain95:.2f} {_load()}"
            )

    def paced(
        self, orgs: list[tuple[str, str]], then: Callable[[dict[str, Any]], None]
    ) -> dict[str, float]:
        """Create the orgs' instances `--rate` per second (then `then` each)."""
        created: dict[str, float] = {}
        interval = 1.0 / self.args.rate
        t0 = time.monotonic()
        with ThreadPoolExecutor(self.args.threads) as pool:
            for i, (ns, org_id) in enumerate(orgs):
                delay = t0 + i * interval - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                pool.submit(lambda o: then(self.create(o[0], o[1], created)), (ns, org_id))
        return created

    def others(self, operator: OperatorProcess, served: int) -> None:
        k = self.args.others
        started = time.monotonic()
        orgs = self.prepare("other", k, shard="other")
        self.burst(orgs, lambda body: None)
        print(f"{k} orgs of another shard created in {time.monotonic() - started:.0f}s {_load()}")
        _quiet(operator)  # it has seen them all
        print(
            f"operator RSS serving {served} orgs with {k} orgs of another shard on the "
            f"control plane: {_mib(operator)} {_load()}"
        )
        self.snapshot(operator)

    def snapshot(self, operator: OperatorProcess) -> None:
        if self.args.snapshots:
            os.kill(operator.pid, signal.SIGUSR1)
            time.sleep(3)


if __name__ == "__main__":
    main()
