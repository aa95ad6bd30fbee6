"""Benchmark: the review queue with many open decisions, beside its ceiling.

On a scratch local control plane and a throwaway PostgreSQL, the platform API runs as a
real server (`humanwork-platform serve` on loopback, under the humanwork-platform-api
ServiceAccount, the admission policies on). Then:

1. ORGS orgs (default 10) and one expert in all of them are made through the API;
2. OPEN open decisions (default 100,000) are created straight in Kubernetes by THREADS
   threads of a plain HTTP client (the cluster admin's certificate): each task is a create
   and a status write giving its step a deadline (1 to 48 hours ahead, as the operator
   would; no operator runs). Prints the creation rate and etcd's size against its quota;
3. the platform's RSS before the tasks exist and once its watch-fed index holds them all
   and the notifier has recorded their `decision_needed` events: memory per open decision
   = delta / count; and the time the index took to catch up;
4. `GET /human-tasks` timed (p50/p95/p99), interleaved with the HTTP stack's floor in the
   same run: `/healthz` (no authentication, one `SELECT 1`) and `/users/me` (the same
   authentication as the queue: token, user, capabilities, orgs). The queue's figures are
   the first page, a deep page (offset OPEN/2), one org's filter, and the count (limit 1:
   the navigation badge's figures);
5. the platform restarted with all the tasks present: time to healthy and to a full queue
   (list to ready), and its RSS then.

The load average (1 min) is printed with each figure: the machine may be shared.
Run by hand; it prints and asserts nothing.

    .venv/bin/python bench/review_queue.py [--open 100000] [--orgs 10] [--threads 16]
        [--samples 200] [--profile queue.txt]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg  # type: ignore[import-untyped]
import httpx
from _kit import PASSWORD, login, py_spy, scratch_platform

from humanwork_dev import cluster
from humanwork_dev.processes import PlatformProcess

ETCD_QUOTA = 4 * 1024**3  # humanwork_dev.cluster's --quota-backend-bytes
STEP = {
    "id": "refund",
    "description": "Refund order 17",
    "kind": "action",
    "tool": "shopify_refund",
    "parameters": {"order": "17", "amount": "12.50"},
    "risk": "high",
}
TASKS = "/apis/humanwork.io/v1alpha1/namespaces/{ns}/agentictasks"


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def _mib(n: float) -> str:
    return f"{n / 1024**2:.1f} MiB"


# --- the tasks, straight in Kubernetes ------------------------------------------------------


def _task(org_id: str, i: int) -> dict[str, object]:
    return {
        "apiVersion": "humanwork.io/v1alpha1",
        "kind": "AgenticTask",
        "metadata": {"name": f"open-{i:06d}"},
        "spec": {
            "orgId": org_id,
            "agentRef": {"name": "shop"},
            "conversationId": str(uuid.uuid4()),
            "description": f"Refund request {i}",
            "requestedBy": "requester",
            "steps": [STEP],
        },
    }


def _status(deadline: datetime) -> dict[str, object]:
    due = deadline.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "status": {
            "phase": "PendingApproval",
            "currentStep": STEP["id"],
            "highestPendingRisk": "high",
            "nextDeadline": due,
            "steps": [{"id": STEP["id"], "state": "Pending", "deadline": due}],
        }
    }


def create_tasks(
    state: Path, server: str, orgs: list[tuple[str, str]], numbers: range, threads: int
) -> float:
    """Open decisions `numbers` spread over `orgs` ((id, namespace)); seconds taken."""
    local = threading.local()
    now = datetime.now(UTC)
    rng = random.Random(numbers.start)
    deadlines = {i: now + timedelta(seconds=rng.randint(3600, 48 * 3600)) for i in numbers}

    def create(i: int) -> None:
        if not hasattr(local, "http"):
            local.http = cluster.admin_http(state)
        org_id, ns = orgs[i % len(orgs)]
        url = server + TASKS.format(ns=ns)
        r = local.http.post(url, json=_task(org_id, i))
        if r.status_code != 201:
            raise RuntimeError(f"create {i}: {r.status_code} {r.text}")
        name = r.json()["metadata"]["name"]
        r = local.http.patch(
            f"{url}/{name}/status",
            json=_status(deadlines[i]),
            headers={"Content-Type": "application/merge-patch+json"},
        )
        if r.status_code != 200:
            raise RuntimeError(f"status {i}: {r.status_code} {r.text}")

    t0 = time.monotonic()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(create, numbers))
    return time.monotonic() - t0


def etcd_size(state: Path, server: str) -> int:
    """etcd's database size as the API server reports it (bytes; 0 when not reported)."""
    with cluster.admin_http(state) as http:
        text = http.get(f"{server}/metrics", timeout=30).text
    for line in text.splitlines():
        if line.startswith(("apiserver_storage_size_bytes", "etcd_db_total_size_in_bytes")):
            return int(float(line.rsplit(" ", 1)[1]))
    return 0


# --- waiting and timing -----------------------------------------------------------------------


def wait_queue(http: httpx.Client, headers: dict[str, str], count: int, limit: float) -> float:
    """Seconds until the queue's pending count reaches `count` (raises after `limit`)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        try:
            r = http.get("/human-tasks", params={"limit": 1}, headers=headers)
            if r.status_code == 200 and r.json()["pending_count"] >= count:
                return time.monotonic() - t0
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"the queue did not reach {count} in {limit:.0f}s")


def wait_events(dsn: str, count: int, limit: float) -> int:
    """How many decision_needed events the notifier recorded, once `count` or `limit`
    seconds passed."""

    async def recorded() -> int:
        conn = await asyncpg.connect(dsn)
        try:
            return int(
                await conn.fetchval(
                    "SELECT count(*) FROM notify_events WHERE event = 'decision_needed'"
                )
            )
        finally:
            await conn.close()

    t0 = time.monotonic()
    while (done := asyncio.run(recorded())) < count and time.monotonic() - t0 < limit:
        time.sleep(2)
    return done


def settle_rss(platform: PlatformProcess, seconds: float = 3.0) -> int:
    """The platform's RSS once it stopped moving (max of a few readings)."""
    readings = []
    for _ in range(int(seconds / 0.5)):
        readings.append(platform.rss_bytes())
        time.sleep(0.5)
    return max(readings[-3:])


def time_requests(
    http: httpx.Client, kinds: dict[str, Callable[[], httpx.Response]], samples: int
) -> dict[str, list[float]]:
    """Each kind of request `samples` times, interleaved so that all see the same load."""
    timings: dict[str, list[float]] = {name: [] for name in kinds}
    for _ in range(5):  # warm up
        for call in kinds.values():
            call().raise_for_status()
    for _ in range(samples):
        for name, call in kinds.items():
            t0 = time.perf_counter()
            r = call()
            timings[name].append(time.perf_counter() - t0)
            r.raise_for_status()
    return timings


def print_timings(timings: dict[str, list[float]], sizes: dict[str, int]) -> None:
    for name, values in timings.items():
        print(
            f"  {name:<34} p50 {_pct(values, 0.5) * 1000:6.1f} ms  p95 "
            f"{_pct(values, 0.95) * 1000:6.1f} ms  p99 {_pct(values, 0.99) * 1000:6.1f} ms"
            f"  ({sizes.get(name, 0)} bytes)"
        )


# --- the run ---------------------------------------------------------------------------------


def setup_orgs(
    http: httpx.Client, orgs: int
) -> tuple[list[tuple[str, str]], dict[str, str], dict[str, str]]:
    """`orgs` orgs, an expert in all of them; ((id, namespace) each, admin, expert)."""
    admin = login(http, "admin")
    made = []
    for i in range(orgs):
        r = http.post("/orgs", json={"slug": f"q{i}", "name": f"Queue {i}"}, headers=admin)
        r.raise_for_status()
        made.append((r.json()["id"], f"org-q{i}"))
    r = http.post(
        "/users",
        json={
            "username": "expert",
            "password": PASSWORD,
            "role": "expert",
            "org_ids": [org_id for org_id, _ in made],
        },
        headers=admin,
    )
    r.raise_for_status()
    return made, admin, login(http, "expert")


def measure(
    args: argparse.Namespace,
    state: Path,
    info: cluster.ClusterInfo,
    platform: PlatformProcess,
    dsn: str,
) -> None:
    http = httpx.Client(base_url=platform.url, timeout=60)
    orgs, _, expert = setup_orgs(http, args.orgs)
    wait_queue(http, expert, 0, 60)
    time.sleep(2)
    before = settle_rss(platform)
    print(f"platform RSS, queue empty: {_mib(before)} ({_load()})")

    live = min(args.live, args.open)
    elapsed = create_tasks(state, info.server, orgs, range(live), args.threads)
    print(
        f"created {live} open decisions with the platform running in {elapsed:.0f}s = "
        f"{live / elapsed:.0f} tasks/s (create + status write each; {args.threads} threads) "
        f"({_load()})"
    )
    caught = wait_queue(http, expert, live, 3600)
    print(f"the watch-fed index caught up {caught:.1f}s after the last write ({_load()})")
    platform.stop()
    elapsed = create_tasks(state, info.server, orgs, range(live, args.open), args.threads)
    print(
        f"created {args.open - live} more with the platform stopped in {elapsed:.0f}s = "
        f"{(args.open - live) / elapsed:.0f} tasks/s ({_load()})"
    )
    print(f"etcd: {_mib(etcd_size(state, info.server))} of its {_mib(ETCD_QUOTA)} quota")
    start(args, http, expert, platform, before)
    drained(args, dsn, platform, before)
    time_pages(args, http, expert, orgs[0][0], platform.pid)


def start(
    args: argparse.Namespace,
    http: httpx.Client,
    expert: dict[str, str],
    platform: PlatformProcess,
    before: int,
) -> None:
    """The platform started with every task present: healthy, then list to ready."""
    t0 = time.monotonic()
    platform.start(timeout=600)
    healthy = time.monotonic() - t0
    http.base_url = httpx.URL(platform.url)
    full = wait_queue(http, expert, args.open, 3600) + healthy
    print(
        f"start with {args.open} tasks present: healthy in {healthy:.1f}s, the queue full "
        f"(list to ready) {full:.1f}s after start ({_load()})"
    )
    time.sleep(3)
    rss = settle_rss(platform)
    print(
        f"platform RSS, index full: {_mib(rss)}; per open decision "
        f"{(rss - before) / args.open / 1024:.2f} KiB ({_load()})"
    )


def drained(args: argparse.Namespace, dsn: str, platform: PlatformProcess, before: int) -> None:
    """Wait (a bounded time) for the notifier's decision_needed events, then the RSS."""
    t0 = time.monotonic()
    recorded = wait_events(dsn, args.open, args.drain)
    rss = settle_rss(platform)
    print(
        f"notifier: {recorded} of {args.open} decision_needed events recorded "
        f"{time.monotonic() - t0:.0f}s after ready; platform RSS then {_mib(rss)}, per open "
        f"decision {(rss - before) / args.open / 1024:.2f} KiB ({_load()})"
    )


def time_pages(
    args: argparse.Namespace,
    http: httpx.Client,
    expert: dict[str, str],
    one_org: str,
    pid: int,
) -> None:
    def get(path: str, **params: str | int) -> Callable[[], httpx.Response]:
        return lambda: http.get(path, params=params, headers=expert)

    deep = min(args.open // 2, 1_000_000)
    kinds = {
        "floor: GET /healthz (no auth)": lambda: http.get("/healthz"),
        "floor: GET /users/me (auth)": get("/users/me"),
        "queue: first page (50)": get("/human-tasks", limit=50),
        f"queue: deep page (offset {deep})": get("/human-tasks", limit=50, offset=deep),
        "queue: one org's filter (50)": get("/human-tasks", limit=50, org_id=one_org),
        "queue: the count (limit 1)": get("/human-tasks", limit=1),
    }
    sizes = {name: len(call().content) for name, call in kinds.items()}
    profiler = py_spy(args.profile, pid)
    timings = time_requests(http, kinds, args.samples)
    if profiler is not None:
        profiler.send_signal(signal.SIGINT)
        profiler.wait(60)
        print(f"py-spy profile of the platform during the timings in {args.profile}")
    print(f"timings, {args.samples} of each, interleaved, one client ({_load()}):")
    print_timings(timings, sizes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--open", type=int, default=100_000)
    parser.add_argument("--orgs", type=int, default=10)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument(
        "--live", type=int, default=2000, help="of which created with the platform running"
    )
    parser.add_argument(
        "--drain", type=float, default=600, help="most seconds to wait for the notifier"
    )
    parser.add_argument(
        "--profile",
        default=None,
        help="record the platform with py-spy during the timings (collapsed stacks to this "
        "file; needs py-spy, e.g. pip install py-spy)",
    )
    args = parser.parse_args()

    with scratch_platform("hw-bench-queue-") as scratch:
        state, info, platform = scratch.state, scratch.info, scratch.platform
        measure(args, state / "cluster", info, platform, scratch.postgres.dsn("bench"))


if __name__ == "__main__":
    main()
