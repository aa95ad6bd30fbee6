"""Benchmark: expert decisions end to end, and the review queue under load.

On a scratch local control plane and a throwaway PostgreSQL, the platform API runs as a
real server (`humanwork-platform serve` on loopback, under the humanwork-platform-api
ServiceAccount). Then:

1. approvals: N tasks (default 200) are created through the API; CLIENTS experts
   (default 8) approve them concurrently over HTTP; each approval is the HTTP request, the
   decision written into the AgenticTask's status (server-side apply with a
   resourceVersion precondition) and the audit row. Prints approvals per second and the
   p50/p95/p99 latency of one approval;
2. the queue: OPEN more tasks (default 10,000) are created directly in Kubernetes; once
   the platform's watch-fed index holds them all, `GET /human-tasks` is timed (p50/p95).

Run by hand or with `make bench`; it prints and asserts nothing.

    .venv/bin/python bench/decisions.py [--tasks 200] [--clients 8] [--open 10000]
        [--profile approvals.txt]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from kubernetes import client, config

from humanwork_dev import cluster
from humanwork_dev.postgres import PostgresServer
from humanwork_dev.processes import PlatformProcess

REPO = Path(__file__).resolve().parents[1]
PASSWORD = "bench-password-0123456789"
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


def _login(http: httpx.Client, username: str) -> dict[str, str]:
    r = http.post("/auth/token", json={"username": username, "password": PASSWORD})
    r.raise_for_status()
    return {"Authorization": f"Bearer {r.json()['access_token']}"}


async def _approve_all(
    base: str, experts: list[dict[str, str]], task_ids: list[str]
) -> tuple[float, list[float]]:
    queue: asyncio.Queue[str] = asyncio.Queue()
    for task_id in task_ids:
        queue.put_nowait(task_id)
    latencies: list[float] = []

    async def worker(headers: dict[str, str]) -> None:
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as http:
            while not queue.empty():
                task_id = queue.get_nowait()
                t0 = time.monotonic()
                r = await http.post(f"/agentic/tasks/{task_id}/steps/read/approve", json={})
                latencies.append(time.monotonic() - t0)
                if r.status_code != 200:
                    raise RuntimeError(f"approval of {task_id}: {r.status_code} {r.text}")

    t0 = time.monotonic()
    await asyncio.gather(*(worker(h) for h in experts))
    return time.monotonic() - t0, latencies


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
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="hw-bench-decisions-") as tmp:
        state = Path(tmp)
        info = cluster.up(state / "cluster")
        postgres = PostgresServer()
        postgres.start()
        platform: PlatformProcess | None = None
        try:
            for path in ("crds", "manifests/base/policies", "manifests/base/platform"):
                subprocess.run(
                    [
                        info.kubectl,
                        "--kubeconfig",
                        info.kubeconfig,
                        "apply",
                        "-k",
                        str(REPO / path),
                    ],
                    check=True,
                    capture_output=True,
                )
            time.sleep(2)  # admission policies become active
            database_url = asyncio.run(postgres.create_database("bench"))
            platform = PlatformProcess(
                info.kubeconfig,
                info.kubectl,
                state / "platform",
                env={
                    "HUMANWORK_DATABASE_URL": database_url,
                    "HUMANWORK_ADMIN_PASSWORD": PASSWORD,
                    "HUMANWORK_JWT_SECRET": "bench-jwt-secret-0123456789-0123456789",
                },
            )
            platform.start()
            _run(args, info, platform.url, platform.pid)
        finally:
            if platform is not None:
                platform.stop()
            postgres.stop()
            cluster.down(state / "cluster")


def _profile(out: str | None, pid: int) -> subprocess.Popen[bytes] | None:
    """py-spy recording the platform process (collapsed stacks) until interrupted."""
    if not out:
        return None
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    proc = subprocess.Popen(
        [spy, "record", "--pid", str(pid), "--format", "raw", "--rate", "200", "-o", out],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1)
    return proc


def _run(args: argparse.Namespace, info: cluster.ClusterInfo, base: str, platform_pid: int) -> None:
    http = httpx.Client(base_url=base, timeout=30)
    admin = _login(http, "admin")
    org = http.post("/orgs", json={"slug": "bench", "name": "Bench"}, headers=admin)
    org.raise_for_status()
    org_id = org.json()["id"]
    ns = "org-bench"
    for username, role in [("requester", "operator")] + [
        (f"expert{i}", "expert") for i in range(args.clients)
    ]:
        r = http.post(
            "/users",
            json={"username": username, "password": PASSWORD, "role": role, "org_ids": [org_id]},
            headers=admin,
        )
        r.raise_for_status()
    requester = _login(http, "requester")
    experts = [_login(http, f"expert{i}") for i in range(args.clients)]

    task_ids = []
    for _ in range(args.tasks):
        body = {"orgId": org_id, "agentRef": "agent", "description": "bench", "steps": [STEP]}
        r = http.post("/agentic/tasks", json=body, headers=requester)
        r.raise_for_status()
        task_ids.append(r.json()["id"])
    profiler = _profile(args.profile, platform_pid)
    elapsed, latencies = asyncio.run(_approve_all(base, experts, task_ids))
    if profiler is not None:
        profiler.send_signal(signal.SIGINT)
        profiler.wait(60)
        print(f"approvals: py-spy profile of the platform in {args.profile}")
    print(
        f"approvals: {len(latencies)} by {args.clients} concurrent experts in {elapsed:.1f}s = "
        f"{len(latencies) / elapsed:.0f} approvals/s; one approval p50 "
        f"{_pct(latencies, 0.5) * 1000:.0f} ms, p95 {_pct(latencies, 0.95) * 1000:.0f} ms, "
        f"p99 {_pct(latencies, 0.99) * 1000:.0f} ms (HTTP, status write, audit row)"
    )

    if args.open <= 0:
        return
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
    expert = experts[0]
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


if __name__ == "__main__":
    main()
