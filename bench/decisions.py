"""Benchmark: expert decisions end to end, and the review queue under load.

On a scratch local control plane and a throwaway PostgreSQL, the platform API runs as a
real server (`humanwork-platform serve` on loopback, under the humanwork-platform-api
ServiceAccount). Then:

1. approvals: N tasks (default 200) are created through the API; CLIENTS experts
   (default 8) approve them concurrently over HTTP; each approval is the HTTP request, the
   decision written into the AgenticTask's status (server-side apply with a
   resourceVersion precondition) and the audit row. Prints approvals per second and the
   p50/p95/p99 latency of one approval;
   the ceiling, run before and after the approvals on N fresh tasks each: CLIENTS threads
   of a plain HTTP client (httpx) make the identical write straight to the API server
   (server-side apply of the same decision, field manager and resourceVersion
   precondition, as the humanwork-platform-api ServiceAccount, the admission policies in
   force). Prints its rate (200 answers only; the others are counted), its latencies, the
   ratio platform / ceiling and the load average of each phase; and the CPU each phase
   cost per answered write, the whole machine's (/proc/stat) and the API server's, etcd's,
   the platform's, PostgreSQL's (with its backends) and the load generator's (this
   process): the ceiling's machine CPU per write over the platform's per
   approval is the highest ratio the two can reach on this machine once its cores are
   busy (the platform and the API server share them);
2. the queue: OPEN more tasks (default 10,000) are created directly in Kubernetes; once
   the platform's watch-fed index holds them all, `GET /human-tasks` is timed (p50/p95).

Run by hand or with `make bench`; it prints and asserts nothing.

    .venv/bin/python bench/decisions.py [--tasks 200] [--clients 8] [--open 10000]
        [--profile approvals.txt] [--gc]

`--gc` puts `bench/gc_hook` on the platform's process and adds its garbage collector's
CPU to the table ("platform gc", part of "platform"), which a profile cannot show.
"""

from __future__ import annotations

import argparse
import base64
import os
import queue
import signal
import ssl
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import httpx
import yaml
from _kit import GcReport, bench_experts, gc_hook_env, py_spy, scratch_platform
from kubernetes import client, config

from humanwork_core import taskflow
from humanwork_core.kube_body import APPLY_CONTENT_TYPE, encode_body
from humanwork_core.policy import STRICT
from humanwork_core.resources import AgenticTask, Verdict
from humanwork_dev import cluster
from humanwork_dev.processes import PlatformProcess

T = TypeVar("T")

STEP = {
    "id": "read",
    "description": "Fetch October orders",
    "kind": "action",
    "tool": "amazon",
    "parameters": {"action": "listOrders", "params": {"CreatedAfter": "2026-10-01T00:00:00Z"}},
    "risk": "low",
}


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _in_threads(
    clients: list[Callable[[], httpx.Client]],
    items: list[T],
    send: Callable[[httpx.Client, T], httpx.Response],
    warm: str,
    on_start: Callable[[], None] = lambda: None,
) -> tuple[float, list[float], list[str]]:
    """One thread per client, all with the same plain synchronous client (httpx), sending
    `items` until none is left: wall time, the latencies of the 200 answers, the other
    answers. Each client first GETs `warm` (connected before the clock starts); `on_start`
    runs just before it does (the CPU meter's start)."""
    work: queue.SimpleQueue[T] = queue.SimpleQueue()
    for item in items:
        work.put(item)
    latencies: list[float] = []
    failed: list[str] = []
    ready = threading.Event()

    def worker(make: Callable[[], httpx.Client]) -> None:
        with make() as http:
            http.get(warm).raise_for_status()
            ready.wait()
            while True:
                try:
                    item = work.get_nowait()
                except queue.Empty:
                    return
                t0 = time.monotonic()
                r = send(http, item)
                if r.status_code == 200:
                    latencies.append(time.monotonic() - t0)
                else:
                    failed.append(f"{r.request.url.path}: {r.status_code} {r.text[:200]}")

    threads = [threading.Thread(target=worker, args=(make,)) for make in clients]
    for thread in threads:
        thread.start()
    time.sleep(0.5)
    on_start()
    t0 = time.monotonic()
    ready.set()
    for thread in threads:
        thread.join()
    return time.monotonic() - t0, latencies, failed


def _approve_all(
    base: str,
    experts: list[dict[str, str]],
    task_ids: list[str],
    on_start: Callable[[], None] = lambda: None,
) -> tuple[float, list[float], list[str]]:
    """The experts approve every task's step concurrently, a thread each with the same
    plain client as the ceiling's (`_in_threads`): wall time, the latencies of the 200
    answers, the other answers."""

    def client(headers: dict[str, str]) -> Callable[[], httpx.Client]:
        return lambda: httpx.Client(base_url=base, headers=headers, timeout=30)

    def approve(http: httpx.Client, task_id: str) -> httpx.Response:
        return http.post(f"/agentic/tasks/{task_id}/steps/read/approve", json={})

    return _in_threads([client(h) for h in experts], task_ids, approve, "/healthz", on_start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--open", type=int, default=10_000)
    parser.add_argument(
        "--profile",
        default=None,
        help="record the platform with py-spy during the approvals (collapsed stacks to "
        "this file; needs py-spy, e.g. pip install py-spy)",
    )
    parser.add_argument(
        "--no-ceiling",
        dest="ceiling",
        action="store_false",
        help="skip the API server's ceiling (the plain client's identical writes)",
    )
    parser.add_argument(
        "--gc",
        action="store_true",
        help="time the platform's garbage collector (bench/gc_hook) and show its CPU",
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="hw-bench-gc-") as tmp:
        gc_file = Path(tmp) / "gc.json"
        env = gc_hook_env(gc_file) if args.gc else {}
        with scratch_platform("hw-bench-decisions-", env=env) as scratch:
            gc_seconds = (lambda: GcReport.read(gc_file).seconds) if args.gc else None
            _run(args, scratch.info, scratch.platform, scratch.postgres.pid(), gc_seconds)
            if args.gc:
                report = GcReport.read(gc_file)
                print(
                    f"\nthe platform's garbage collector over the whole run: "
                    f"{report.seconds * 1000:.0f} ms of CPU, collections {report.collections} "
                    f"(generations 0, 1, 2), thresholds {report.threshold}"
                )


@dataclass
class Phase:
    """One timed phase: its name, wall time, latencies, answers that were not 200, load."""

    name: str
    elapsed: float
    latencies: list[float]
    failed: int = 0
    load: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)
    """CPU milliseconds per answered write, by process (`CpuMeter`)."""

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.elapsed if self.elapsed else 0.0

    def line(self) -> str:
        ms = (
            [_pct(self.latencies, q) * 1000 for q in (0.5, 0.95, 0.99)]
            if self.latencies
            else [0.0] * 3
        )
        return (
            f"{self.name}: {len(self.latencies)} in {self.elapsed:.1f}s = {self.rate:.0f}/s; "
            f"p50 {ms[0]:.0f} ms, p95 {ms[1]:.0f} ms, p99 {ms[2]:.0f} ms; "
            f"not 200: {self.failed}; load average {self.load:.2f}"
        )


def _create_tasks(
    http: httpx.Client, requester: dict[str, str], org_id: str, count: int
) -> list[str]:
    task_ids = []
    for _ in range(count):
        body = {"orgId": org_id, "agentRef": "agent", "description": "bench", "steps": [STEP]}
        r = http.post("/agentic/tasks", json=body, headers=requester)
        r.raise_for_status()
        task_ids.append(r.json()["id"])
    return task_ids


class ApiServer:
    """A plain HTTP client of the API server as the platform's ServiceAccount (its token
    and the cluster's CA from the platform's kubeconfig)."""

    def __init__(self, kubeconfig: Path) -> None:
        doc = yaml.safe_load(kubeconfig.read_text())
        cluster_doc = doc["clusters"][0]["cluster"]
        self.server = cluster_doc["server"]
        self.headers = {"Authorization": f"Bearer {doc['users'][0]['user']['token']}"}
        ca = cluster_doc.get("certificate-authority")
        if ca is None:
            ca_file = kubeconfig.with_name("apiserver-ca.crt")
            ca_file.write_bytes(base64.b64decode(cluster_doc["certificate-authority-data"]))
            ca = str(ca_file)
        self.verify = ssl.create_default_context(cafile=ca)

    def client(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.server, headers=self.headers, verify=self.verify, timeout=30
        )


def _task_path(task_id: str) -> str:
    namespace, name = task_id.split("/")
    return f"/apis/humanwork.io/v1alpha1/namespaces/{namespace}/agentictasks/{name}"


def _decision_body(http: httpx.Client, task_id: str, expert: str) -> bytes:
    """What the platform applies when `expert` approves the step: the task as it is now,
    the contract's decision (`taskflow.decide`), the platform's part of the status."""
    r = http.get(_task_path(task_id))
    r.raise_for_status()
    task = AgenticTask.from_wire(r.json())
    step = task.step("read")
    assert step is not None
    request = taskflow.DecisionRequest(
        verdict=Verdict.APPROVE,
        by=expert,
        step_hash=taskflow.step_hash(step),
        idempotency_key=uuid.uuid4().hex,
    )
    after = taskflow.decide(task, "read", request, datetime.now(UTC), org=STRICT)
    namespace, name = task_id.split("/")
    return encode_body(
        {
            "apiVersion": "humanwork.io/v1alpha1",
            "kind": "AgenticTask",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "resourceVersion": task.metadata.resource_version,
            },
            "status": taskflow.owned_status(after, taskflow.Writer.PLATFORM_API),
        }
    )


def _ceiling(
    name: str, apiserver: ApiServer, task_ids: list[str], clients: int, meter: CpuMeter
) -> Phase:
    """`clients` threads applying the prepared decisions straight to the API server."""
    with apiserver.client() as http:
        bodies = [
            (task_id, _decision_body(http, task_id, f"expert{i % clients}"))
            for i, task_id in enumerate(task_ids)
        ]
    headers = {"Content-Type": APPLY_CONTENT_TYPE}
    params = {"fieldManager": "humanwork-platform-api", "force": "true"}

    def apply(http: httpx.Client, item: tuple[str, bytes]) -> httpx.Response:
        task_id, body = item
        path = _task_path(task_id) + "/status"
        return http.patch(path, content=body, headers=headers, params=params)

    clients_ = [apiserver.client] * clients
    elapsed, latencies, failed = _in_threads(clients_, bodies, apply, "/version", meter.start)
    spent = meter.per_write(len(latencies))
    phase = Phase(name, elapsed, latencies, len(failed), os.getloadavg()[0], spent)
    for answer in failed[:3]:
        print(f"{name}: not 200: {answer}")
    return phase


def _cpu_seconds(pid: int) -> float:
    """User and system CPU time of process `pid` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _tree_cpu_seconds(pid: int) -> float:
    """`_cpu_seconds` of process `pid` and its children: those it has reaped (its stat's
    cutime and cstime) and those alive now (PostgreSQL's backends under its postmaster)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    total = (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")
    total += _cpu_seconds(pid)
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        try:
            total += _cpu_seconds(int(child))
        except FileNotFoundError:  # it ended in between: counted in cutime next time
            continue
    return total


def _machine_busy_seconds() -> float:
    """CPU time all processes of the machine spent so far, every core (/proc/stat)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """The CPU a phase cost, per answered write: the whole machine (/proc/stat) and each
    named process. On a machine whose cores the platform shares with the API server, the
    ratio of the ceiling's machine CPU per write to the platform's per approval bounds the
    ratio of their rates once the machine is busy."""

    def __init__(
        self,
        pids: dict[str, int],
        trees: dict[str, int] | None = None,
        parts: dict[str, Callable[[], float]] | None = None,
    ) -> None:
        self.pids = {**pids, **(trees or {})}
        self.trees = set(trees or ())  # counted with their children (`_tree_cpu_seconds`)
        self.parts = parts or {}  # CPU seconds of a part of a named process (not in "rest")
        self.before: dict[str, float] = {}

    def _now(self) -> dict[str, float]:
        now = {
            name: (_tree_cpu_seconds if name in self.trees else _cpu_seconds)(pid)
            for name, pid in self.pids.items()
        }
        now.update({name: seconds() for name, seconds in self.parts.items()})
        now["machine"] = _machine_busy_seconds()
        return now

    def start(self) -> None:
        self.before = self._now()

    def per_write(self, writes: int) -> dict[str, float]:
        now = self._now()
        spent = {name: (now[name] - self.before[name]) * 1000 / max(1, writes) for name in now}
        spent["rest"] = spent["machine"] - sum(spent[n] for n in self.pids)
        return spent


def phase_meter(
    info: cluster.ClusterInfo,
    platform_pid: int,
    postgres_pid: int,
    gc_seconds: Callable[[], float] | None = None,
) -> CpuMeter:
    """The CPU meter of a phase: the API server, etcd, the platform (and its garbage
    collector, `gc_seconds` given), PostgreSQL with its backends and this process."""
    return CpuMeter(
        {
            "kube-apiserver": info.pids["kube-apiserver"],
            "etcd": info.pids["etcd"],
            "platform": platform_pid,
            "load generator": os.getpid(),
        },
        trees={"postgres": postgres_pid},
        parts={"platform gc": gc_seconds} if gc_seconds is not None else None,
    )


def _run(
    args: argparse.Namespace,
    info: cluster.ClusterInfo,
    platform: PlatformProcess,
    postgres_pid: int,
    gc_seconds: Callable[[], float] | None = None,
) -> None:
    base, platform_pid = platform.url, platform.pid
    http = httpx.Client(base_url=base, timeout=30)
    org_id, requester, experts = bench_experts(http, args.clients)
    apiserver = ApiServer(platform.kubeconfig)

    meter = phase_meter(info, platform_pid, postgres_pid, gc_seconds)
    phases: list[Phase] = []
    if args.ceiling:
        ids = _create_tasks(http, requester, org_id, args.tasks)
        phases.append(_ceiling("ceiling before", apiserver, ids, args.clients, meter))
        print(phases[-1].line(), flush=True)
    task_ids = _create_tasks(http, requester, org_id, args.tasks)
    time.sleep(1)  # the platform's watch has seen them
    profiler = py_spy(args.profile, platform_pid)
    elapsed, latencies, failed = _approve_all(base, experts, task_ids, meter.start)
    spent = meter.per_write(len(latencies))
    platform_phase = Phase("platform", elapsed, latencies, len(failed), os.getloadavg()[0], spent)
    for answer in failed[:3]:
        print(f"approvals: not 200: {answer}")
    if profiler is not None:
        profiler.send_signal(signal.SIGINT)
        profiler.wait(60)
        print(f"approvals: py-spy profile of the platform in {args.profile}")
    print(
        f"approvals: {len(latencies)} by {args.clients} concurrent experts in {elapsed:.1f}s = "
        f"{len(latencies) / elapsed:.0f} approvals/s; one approval p50 "
        f"{_pct(latencies, 0.5) * 1000:.0f} ms, p95 {_pct(latencies, 0.95) * 1000:.0f} ms, "
        f"p99 {_pct(latencies, 0.99) * 1000:.0f} ms (HTTP, status write, audit row); "
        f"not 200: {len(failed)}; load average {platform_phase.load:.2f}; the platform's CPU "
        f"{spent['platform']:.1f} ms per approval",
        flush=True,
    )
    if args.ceiling:
        ids = _create_tasks(http, requester, org_id, args.tasks)
        phases.append(_ceiling("ceiling after", apiserver, ids, args.clients, meter))
        print(phases[-1].line(), flush=True)
        _summary(platform_phase, phases)

    if args.open > 0:
        _queue(args, info, http, org_id, experts[0])


def _queue(
    args: argparse.Namespace,
    info: cluster.ClusterInfo,
    http: httpx.Client,
    org_id: str,
    expert: dict[str, str],
) -> None:
    """The review queue's page time with `args.open` open decisions of org `bench`."""
    ns = "org-bench"
    api = config.new_client_from_config(config_file=info.kubeconfig)
    api.configuration.connection_pool_maxsize = 32
    objects = client.CustomObjectsApi(api)

    def create(i: int) -> None:
        objects.create_namespaced_custom_object(
            "humanwork.io",
            "v1alpha1",
            ns,
            "agentictasks",
            {
                "apiVersion": "humanwork.io/v1alpha1",
                "kind": "AgenticTask",
                "metadata": {"name": f"open-{i:05d}"},
                "spec": {
                    "orgId": org_id,
                    "agentRef": {"name": "agent"},
                    "conversationId": str(uuid.uuid4()),
                    "description": "open decision",
                    "requestedBy": "requester",
                    "steps": [STEP],
                },
            },
        )

    t0 = time.monotonic()
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(create, range(args.open)))
    print(f"queue: {args.open} open tasks created in {time.monotonic() - t0:.0f}s")
    deadline = time.monotonic() + 600
    pending = 0
    while time.monotonic() < deadline:
        page = http.get("/human-tasks", params={"limit": 50}, headers=expert).json()
        pending = int(page.get("pending_count", page.get("pendingCount", 0)))
        if pending >= args.open:
            break
        time.sleep(1)
    timings: list[float] = []
    for _ in range(200):
        t1 = time.monotonic()
        r = http.get("/human-tasks", params={"limit": 50}, headers=expert)
        timings.append(time.monotonic() - t1)
        r.raise_for_status()
    print(
        f"queue: GET /human-tasks (50 per page) with {pending} open decisions: p50 "
        f"{_pct(timings, 0.5) * 1000:.1f} ms, p95 {_pct(timings, 0.95) * 1000:.1f} ms, "
        f"median of 200 = {statistics.median(timings) * 1000:.1f} ms"
    )


def _summary(platform: Phase, ceilings: list[Phase]) -> None:
    """The side-by-side table: the platform, each ceiling run and the ratios."""
    print("\napprovals against the API server's ceiling (same run, same writes):")
    columns = ("per s", "p50 ms", "p95 ms", "p99 ms")
    print(f"  {'':16} " + " ".join(f"{c:>7}" for c in columns) + f" {'not 200':>8} {'load':>5}")
    for phase in [ceilings[0], platform, *ceilings[1:]]:
        ms = [_pct(phase.latencies, q) * 1000 for q in (0.5, 0.95, 0.99)]
        print(
            f"  {phase.name:16} {phase.rate:7.0f} {ms[0]:7.0f} {ms[1]:7.0f} {ms[2]:7.0f} "
            f"{phase.failed:8d} {phase.load:5.2f}"
        )
    ratios = ", ".join(f"{platform.rate / c.rate:.2f} ({c.name})" for c in ceilings if c.rate)
    print(f"  ratio platform / ceiling: {ratios}")
    names: tuple[str, ...] = ("machine", "kube-apiserver", "etcd", "platform")
    if "platform gc" in platform.cpu:
        names += ("platform gc",)
    names += ("postgres", "load generator", "rest")
    print("\nCPU ms per write (machine: every process, all cores; load generator: this")
    print("process, the experts' clients and the plain client; rest: the controller manager,")
    print("the scheduler, kwok, the kernel's own work and anything else running):")
    print(f"  {'':16} " + " ".join(f"{n:>14}" for n in names))
    for phase in [ceilings[0], platform, *ceilings[1:]]:
        cells = (f"{phase.cpu.get(n, 0):14.{2 if n == 'platform gc' else 1}f}" for n in names)
        print(f"  {phase.name:16} " + " ".join(cells))
    bounds = ", ".join(
        f"{c.cpu['machine'] / platform.cpu['machine']:.2f} ({c.name})"
        for c in ceilings
        if platform.cpu.get("machine")
    )
    print(f"  ratio bound by the machine's CPU (ceiling's CPU per write / platform's): {bounds}")
    # the platform's own process taken out: what the rest of its path (the API server's
    # watch of the decision, PostgreSQL, the kernel's extra hops) leaves of the bound
    rest = platform.cpu.get("machine", 0) - platform.cpu.get("platform", 0)
    without = ", ".join(f"{c.cpu['machine'] / rest:.2f} ({c.name})" for c in ceilings if rest > 0)
    print(f"  the same bound were the platform's own CPU nil: {without}")


if __name__ == "__main__":
    main()
