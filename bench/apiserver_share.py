"""Benchmark: what the API server spends on one status write, by who sends it.

`bench/decisions.py` finds the API server spending more CPU on an approval's status write
than on the plain client's identical write. This script measures where that comes from,
on a scratch control plane with the platform as a real server (as there), in ROUNDS
rounds of three phases on TASKS fresh tasks each:

1. `httpx`: the plain client's ceiling of `bench/decisions.py` (CLIENTS threads of httpx,
   the same server-side apply as the platform's ServiceAccount);
2. `lean`: the same writes sent by the platform's own API client
   (`humanwork_core.kube_client.Kube`, aiohttp on uvloop, CLIENTS coroutines) from this
   process: is it the client?
3. `approvals`: CLIENTS experts approving through the platform, as in `bench/decisions.py`.

For each it prints the rate, the CPU per write (the machine's and each process's), the
requests the API server counted in the phase (`apiserver_request_total`, every resource:
what the platform sends per approval; a ceiling's count includes the GET of each task
that prepares its body before the clock starts) and its threads' context switches per write
(voluntary: a thread that went to sleep waiting; involuntary: one preempted). Run by hand;
it prints and asserts nothing.

    .venv/bin/python bench/apiserver_share.py [--tasks 1500] [--clients 8] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import uvloop
from _kit import bench_experts, scratch_platform
from decisions import (
    ApiServer,
    CpuMeter,
    Phase,
    _approve_all,
    _ceiling,
    _create_tasks,
    _decision_body,
    _task_path,
    phase_meter,
)

from humanwork_core import kube_credentials
from humanwork_core.kube_body import APPLY_CONTENT_TYPE
from humanwork_core.kube_client import Kube
from humanwork_dev import cluster

Counters = dict[str, float]


def _requests(info: cluster.ClusterInfo) -> Counters:
    """The API server's request counters (`apiserver_request_total`), by their labels."""
    raw = [info.kubectl, "--kubeconfig", info.kubeconfig, "get", "--raw", "/metrics"]
    counters: Counters = {}
    for line in subprocess.run(raw, capture_output=True, text=True, check=True).stdout.split("\n"):
        if line.startswith("apiserver_request_total{"):
            labels, value = line.rsplit(" ", 1)
            counters[labels] = float(value)
    return counters


def _switches(pid: int) -> tuple[int, int]:
    """Voluntary and involuntary context switches of every thread of process `pid`."""
    voluntary = involuntary = 0
    for thread in Path(f"/proc/{pid}/task").iterdir():
        try:
            status = (thread / "status").read_text()
        except FileNotFoundError:  # the thread ended
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        voluntary += int(fields["voluntary_ctxt_switches"])
        involuntary += int(fields["nonvoluntary_ctxt_switches"])
    return voluntary, involuntary


def _lean(
    name: str,
    apiserver: ApiServer,
    kubeconfig: Path,
    task_ids: list[str],
    clients: int,
    meter: CpuMeter,
) -> Phase:
    """The ceiling's writes sent by the platform's own client, `clients` at a time."""
    with apiserver.client() as http:
        bodies = [
            (task_id, _decision_body(http, task_id, f"expert{i % clients}"))
            for i, task_id in enumerate(task_ids)
        ]
    creds = kube_credentials.from_kubeconfig(kubeconfig)
    latencies: list[float] = []
    started = [0.0]

    async def run() -> None:
        kube = Kube.open(
            creds, field_manager="humanwork-platform-api", user_agent="bench", connections=clients
        )
        await asyncio.gather(*(kube.call("GET", "/version") for _ in range(clients)))
        query = [("fieldManager", kube.field_manager), ("force", "true")]

        async def writer() -> None:
            while bodies:
                task_id, body = bodies.pop()
                t0 = time.monotonic()
                path = _task_path(task_id) + "/status"
                await kube.call(
                    "PATCH",
                    path,
                    body=body,
                    content_type=APPLY_CONTENT_TYPE,
                    query=query,
                    answer=False,
                )
                latencies.append(time.monotonic() - t0)

        meter.start()
        started[0] = time.monotonic()
        await asyncio.gather(*(writer() for _ in range(clients)))
        started[0] = time.monotonic() - started[0]
        await kube.close()

    uvloop.run(run())
    spent = meter.per_write(len(latencies))
    return Phase(name, started[0], latencies, 0, os.getloadavg()[0], spent)


def _measured(
    info: cluster.ClusterInfo, phase: Callable[[list[str]], Phase], ids: list[str]
) -> None:
    """Run `phase` on the tasks `ids`; print it, its CPU per write, the API server's
    requests and its context switches."""
    apiserver, writes = info.pids["kube-apiserver"], len(ids)
    counted, switched = _requests(info), _switches(apiserver)
    done = phase(ids)
    after, switched_after = _requests(info), _switches(apiserver)
    cpu = ", ".join(f"{name} {ms:.2f}" for name, ms in done.cpu.items())
    print(f"{done.line()}\n  CPU ms per write: {cpu}")
    voluntary, involuntary = (b - a for a, b in zip(switched, switched_after, strict=True))
    print(
        f"  the API server's context switches per write: voluntary {voluntary / writes:.1f}, "
        f"involuntary {involuntary / writes:.1f}"
    )
    for labels, value in sorted(after.items()):
        if value - counted.get(labels, 0) >= 1:
            short = re.sub(r'(component|dry_run|scope|version)="[^"]*",?', "", labels)
            print(f"  {int(value - counted.get(labels, 0)):6d} {short[24:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=1500)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with scratch_platform("hw-bench-apiserver-share-") as scratch:
        info, platform = scratch.info, scratch.platform
        http = httpx.Client(base_url=platform.url, timeout=30)
        org_id, requester, experts = bench_experts(http, args.clients)
        apiserver = ApiServer(platform.kubeconfig)
        meter = phase_meter(info, platform.pid, scratch.postgres.pid())

        def fresh() -> list[str]:
            ids = _create_tasks(http, requester, org_id, args.tasks)
            time.sleep(1)  # the platform's watch has seen them
            return ids

        def approvals(ids: list[str]) -> Phase:
            elapsed, latencies, failed = _approve_all(platform.url, experts, ids, meter.start)
            spent = meter.per_write(len(latencies))
            return Phase("approvals", elapsed, latencies, len(failed), os.getloadavg()[0], spent)

        def plain(ids: list[str]) -> Phase:
            return _ceiling("httpx", apiserver, ids, args.clients, meter)

        def lean(ids: list[str]) -> Phase:
            return _lean("lean", apiserver, platform.kubeconfig, ids, args.clients, meter)

        for _ in range(args.rounds):
            for phase in (plain, lean, approvals):
                _measured(info, phase, fresh())


if __name__ == "__main__":
    main()
