"""Benchmark: what a request costs the platform before it does any work (its floor).

In one run, on the same scratch control plane, throwaway PostgreSQL and real platform
server as bench/decisions.py (`_kit.scratch_platform`, the same settings), CLIENTS
concurrent clients (default 8) make, round after round (the phases interleaved, so that a
change of the machine's load touches them all alike):

  a. `GET /healthz`: no authentication; `SELECT 1` on a connection and the newest
     restore's audit row in a session (two checkouts, two statements);
  b. `GET /users/me`, authenticated: the token check, the caller's query and one read of
     its own (the caller's orgs), both on the driver with no transaction (before
     `ee0fe85`: in a session's transaction, and the user's row read as well);
  c. the approval, as bench/decisions.py makes it: TASKS fresh tasks (created through the
     API before the round, not timed), one approval each;
  d. a bare ASGI app (one route answering `{}`, no framework) in a subprocess, served by
     uvicorn with the platform's settings (uvloop, httptools, no proxy headers, the access
     log on): the server's own per-request floor on this machine;
  e. the same route in a bare FastAPI app, same server: the framework's floor;
  f. e with one SQLAlchemy session's `SELECT 1` on the same PostgreSQL (asyncpg, a pool
     of 20): the floor of a FastAPI + SQLAlchemy server that touches its database.

For each, the serving process's CPU (user + system, /proc) per answered request and the
requests per second, the median of the rounds; then the ratios c/a, c/b, b/d and the load
average. The bare apps' rates are bounded by this load generator (one Python process), not
by their server: their CPU per request is the figure. Run by hand or with `make bench`;
it prints and asserts nothing.

    .venv/bin/python bench/request_floor.py [--clients 8] [--requests 1000] [--tasks 200]
        [--rounds 3] [--profile PREFIX]

With `--profile PREFIX`, py-spy records the platform during the first round's b and c
phases (collapsed stacks into PREFIX-me.txt and PREFIX-approve.txt).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from _kit import bench_experts, py_spy, scratch_platform
from decisions import _approve_all, _cpu_seconds, _create_tasks

from humanwork_dev.processes import PlatformProcess, free_port

BARE_APP = '''
"""A bare app: ASGI (kind `asgi`), FastAPI (`fastapi`), or FastAPI and one SQLAlchemy
session's `SELECT 1` on a pooled asyncpg connection (`sqlalchemy`): one route, `{}`."""
import sys

import uvicorn

kind, port = sys.argv[1], int(sys.argv[2])
if kind in ("fastapi", "sqlalchemy"):
    from fastapi import FastAPI
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

    app = FastAPI()
    if kind == "sqlalchemy":
        sessions = async_sessionmaker(create_async_engine(sys.argv[3], pool_size=20))

    @app.get("/")
    async def root() -> dict:
        if kind == "sqlalchemy":
            async with sessions() as session:
                await session.execute(text("SELECT 1"))
        return {}
else:
    HEADERS = [(b"content-type", b"application/json"), (b"content-length", b"2")]

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
        await send({"type": "http.response.body", "body": b"{}"})

uvicorn.run(app, host="127.0.0.1", port=port, proxy_headers=False, loop="uvloop",
            http="httptools")
'''


@dataclass
class Floor:
    """One measured kind of request over the rounds: per round, answered requests, wall
    time and the serving process's CPU seconds; the answers that were not 200."""

    name: str
    rounds: list[tuple[int, float, float]] = field(default_factory=list)
    failed: int = 0

    @property
    def cpu_ms(self) -> float:
        """CPU milliseconds per answered request, the median of the rounds."""
        return statistics.median(cpu * 1000 / max(1, n) for n, _, cpu in self.rounds)

    @property
    def rate(self) -> float:
        """Answered requests per second, the median of the rounds."""
        return statistics.median(n / wall for n, wall, _ in self.rounds if wall)

    def line(self) -> str:
        spread = [cpu * 1000 / max(1, n) for n, _, cpu in self.rounds]
        answered = sum(n for n, _, _ in self.rounds)
        return (
            f"  {self.name:42} {answered:7d} {self.failed:7d} {self.rate:8.0f} "
            f"{self.cpu_ms:8.2f}   ({', '.join(f'{s:.2f}' for s in spread)})"
        )


async def _hammer(
    base: str, path: str, headers: list[dict[str, str]], count: int
) -> tuple[int, float, int]:
    """`count` GETs of `path`, one worker per entry of `headers` (each its own connection);
    the answered (200) requests, the wall time, the others."""
    left = [count]
    answered, failed = [0], [0]

    async def worker(h: dict[str, str]) -> None:
        async with httpx.AsyncClient(base_url=base, headers=h, timeout=30) as http:
            await http.get(path)  # connect before the clock starts
            await ready.wait()
            while left[0] > 0:
                left[0] -= 1
                r = await http.get(path)
                if r.status_code == 200:
                    answered[0] += 1
                else:
                    failed[0] += 1

    ready = asyncio.Event()
    tasks = [asyncio.create_task(worker(h)) for h in headers]
    await asyncio.sleep(0.3)
    t0 = time.monotonic()
    ready.set()
    await asyncio.gather(*tasks)
    return answered[0], time.monotonic() - t0, failed[0]


def _get_round(floor: Floor, pid: int, run: Callable[[], tuple[int, float, int]]) -> None:
    """One round of GETs, the serving process `pid`'s CPU measured around it."""
    cpu0 = _cpu_seconds(pid)
    answered, wall, failed = run()
    # the connect GETs before the clock count to the CPU: a handful in a thousand
    floor.rounds.append((answered, wall, _cpu_seconds(pid) - cpu0))
    floor.failed += failed


class BareServer:
    """The bare app of `kind` (`asgi` or `fastapi`) served by uvicorn in a subprocess."""

    def __init__(self, kind: str, workdir: Path, database_url: str) -> None:
        script = workdir / "bare_app.py"
        script.write_text(BARE_APP)
        self.port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, str(script), kind, str(self.port), database_url],
            stdout=(workdir / f"bare-{kind}.log").open("ab"),
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url, timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        raise RuntimeError(f"the bare {kind} app did not answer")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=1000, help="GETs per phase and round")
    parser.add_argument("--tasks", type=int, default=200, help="approvals per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", default=None, help="py-spy the first round's b and c")
    parser.add_argument("--no-bare", dest="bare", action="store_false", help="skip d, e, f")
    args = parser.parse_args()
    with scratch_platform("hw-bench-floor-") as scratch:
        bare = []
        if args.bare:
            url = scratch.platform.env["HUMANWORK_DATABASE_URL"]
            bare = [BareServer(k, scratch.state, url) for k in ("asgi", "fastapi", "sqlalchemy")]
        try:
            _run(args, scratch.platform, bare)
        finally:
            for server in bare:
                server.stop()


def _run(args: argparse.Namespace, platform: PlatformProcess, bare: list[BareServer]) -> None:
    base, pid = platform.url, platform.pid
    http = httpx.Client(base_url=base, timeout=30)
    org_id, requester, experts = bench_experts(http, args.clients)
    anonymous = [{} for _ in experts]
    health = Floor("a. GET /healthz")
    me = Floor("b. GET /users/me (authenticated)")
    approve = Floor("c. approval")
    bares = [
        (Floor(f"{d}. bare {k} app, same uvicorn"), s)
        for d, k, s in zip("def", ("ASGI", "FastAPI", "FastAPI+SQLAlchemy"), bare, strict=False)
    ]
    # warm every path once (the statements' caches, the pools' connections)
    asyncio.run(_hammer(base, "/healthz", anonymous, 100))
    asyncio.run(_hammer(base, "/users/me", experts, 100))
    _approve_all(base, experts, _create_tasks(http, requester, org_id, 16))
    for server in bare:
        asyncio.run(_hammer(server.url, "/", anonymous, 100))
    time.sleep(2)  # the warm-up's watch events are handled
    cpu0 = _cpu_seconds(pid)
    time.sleep(5)
    idle = (_cpu_seconds(pid) - cpu0) * 1000 / 5
    print(f"the platform idle (watch, notifier, timers): {idle:.1f} ms of CPU per second")
    loads = []
    for i in range(args.rounds):
        _get_round(
            health, pid, lambda: asyncio.run(_hammer(base, "/healthz", anonymous, args.requests))
        )
        spy = py_spy(f"{args.profile}-me.txt" if args.profile and i == 0 else None, pid)
        _get_round(me, pid, lambda: asyncio.run(_hammer(base, "/users/me", experts, args.requests)))
        _stop(spy)
        task_ids = _create_tasks(http, requester, org_id, args.tasks)
        time.sleep(1)  # the platform's watch has seen them
        spy = py_spy(f"{args.profile}-approve.txt" if args.profile and i == 0 else None, pid)
        cpu0: list[float] = []  # once the experts' clients are connected
        wall, latencies, failed = _approve_all(
            base, experts, task_ids, lambda marks=cpu0: marks.append(_cpu_seconds(pid))
        )
        approve.rounds.append((len(latencies), wall, _cpu_seconds(pid) - cpu0[0]))
        _stop(spy)
        approve.failed += len(failed)
        for answer in failed[:3]:
            print(f"approvals: not 200: {answer}")
        for floor, server in bares:
            url = server.url
            _get_round(
                floor,
                server.proc.pid,
                lambda u=url: asyncio.run(_hammer(u, "/", anonymous, args.requests)),
            )
        loads.append(os.getloadavg()[0])
        print(f"round {i + 1}/{args.rounds} done; load average {loads[-1]:.2f}", flush=True)
    _report(args, [health, me, approve, *(f for f, _ in bares)], loads)


def _stop(spy: subprocess.Popen[bytes] | None) -> None:
    """Stop a py-spy recording (it writes its file as it stops)."""
    if spy is not None:
        spy.send_signal(signal.SIGINT)
        spy.wait(60)


def _report(args: argparse.Namespace, floors: list[Floor], loads: list[float]) -> None:
    print(
        f"\nwhat a request costs its server ({args.clients} concurrent clients, {args.rounds} "
        f"rounds of {args.requests} GETs or {args.tasks} approvals; CPU of the serving process, "
        "median of the rounds, each round's in brackets):"
    )
    print(f"  {'':42} {'200':>7} {'not 200':>7} {'per s':>8} {'CPU ms':>8}   (rounds)")
    for floor in floors:
        print(floor.line())
    by = {f.name[0]: f.cpu_ms for f in floors}
    ratios = [("c/a", "c", "a"), ("c/b", "c", "b"), ("b/a", "b", "a"), ("b/d", "b", "d")]
    ratios += [("a/f", "a", "f"), ("b/f", "b", "f"), ("c/f", "c", "f"), ("e/d", "e", "d")]
    shown = [f"{n} {by[x] / by[y]:.2f}" for n, x, y in ratios if x in by and by.get(y)]
    print(f"  CPU ratios: {', '.join(shown)}; c - b = {by['c'] - by['b']:.2f} ms")
    print(f"  load average per round: {', '.join(f'{x:.2f}' for x in loads)}")


if __name__ == "__main__":
    main()
