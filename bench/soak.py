"""A soak of the whole stack: a steady rate of tasks, approvals and executions for N minutes
with a fault every few minutes, and what it cost and broke.

    python bench/soak.py                       # 30 minutes, a fault every 2.5 minutes
    python bench/soak.py --minutes 3           # a quick run
    python bench/soak.py --minutes 5 --rate 0.5 --fault-every 75
    python bench/soak.py --minutes 10 --faults agent --platform-heap /tmp/heap  # its memory

It starts the process-mode stack (`humanwork_dev.stack`, agent as a local process, the
platform on SQLite in the stack's state folder) on a scratch control plane in a temporary
folder, with ports offset from `make up`'s, and replaces the stack's fake upstreams by a
fake Shopify in this process, so that every side effect is seen with the idempotency key
it carried. Then, for `--minutes`: a requester files a one-step write task every
1/`--rate` seconds, an expert approves it (retrying with the same `Idempotency-Key` when
the platform is down), and the agent executes it. Every `--fault-every` seconds, in turn:
the agent process is killed (SIGKILL) and started again; the platform is killed (SIGKILL)
and started again. A step whose outcome became unknown is resolved as an expert would:
by looking at the upstream (this fake's ledger) and saying what it shows.

It prints throughput, p95 latencies (the approval call; approval to completion, as seen
by polling), the RSS of the platform, operator and agent over time with the slope of each
once warm (MiB per minute, per process lifetime), and the invariant counts: approvals
lost (answered 2xx, missing from the task's status), double executions (one step's key
seen twice upstream), unapproved side effects (a key of no approved step), and tasks not
finished in the end.

`--faults` names the parts killed in turn (`none`: no fault). `--platform-heap DIR` puts
`bench/heap_hook` on the platform's process alone (tracemalloc) and signals it every
`--heap-every` seconds, so DIR fills with its heap reports and snapshots; compare two with
`bench/heap_diff.py`. Use it with `--faults agent` or `none`: a killed platform starts
its tracing anew.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("HUMANWORK_STACK_PORT_OFFSET", "700")

import httpx
from _kit import TOKEN_PATH, bearer, credentials, token_of

from humanwork_dev import cluster, stack
from humanwork_dev.fakes import catalog
from humanwork_dev.fakes.shopify import FakeShopify

COMPONENTS = ("platform", "operator", "agent")
MUG = catalog.BY_SKU[catalog.DISCREPANT_SKU].inventory_item_id
BASE = f"http://127.0.0.1:{stack.PLATFORM_PORT}"
HEAP_HOOK = Path(__file__).resolve().parent / "heap_hook"
HEAP_TRACE = os.environ.get("HUMANWORK_HEAP_TRACE", "late")  # 0: counts only, full speed
HEAP_TYPES = "_Batch,Event,AgenticTask,SSLProtocol,_SSLProtocolTransport,ResponseHandler,Session"


@dataclass
class Run:
    """What the soak saw."""

    started: float = field(default_factory=time.monotonic)
    tasks: dict[str, float] = field(default_factory=dict)  # task id -> approved at
    approved: set[str] = field(default_factory=set)  # approvals answered 2xx
    uids: dict[str, str] = field(default_factory=dict)
    done: dict[str, float] = field(default_factory=dict)  # task id -> completed at
    approve_ms: list[float] = field(default_factory=list)
    complete_s: list[float] = field(default_factory=list)
    rss: list[tuple[float, str, int, float]] = field(default_factory=list)  # t, comp, pid, MiB
    faults: list[tuple[float, str, float]] = field(default_factory=list)  # t, what, recovery s
    retries: int = 0
    resolved: Counter[str] = field(default_factory=Counter)

    def now(self) -> float:
        return time.monotonic() - self.started


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def _send(http: httpx.AsyncClient, run: Run, method: str, path: str, **kw: Any) -> Any:
    """The request, retried while the platform is down (connection errors, 5xx)."""
    for _ in range(600):
        try:
            r = await http.request(method, f"{BASE}{path}", **kw)
        except httpx.TransportError:
            r = None
        if r is not None and r.status_code < 500:
            return r
        run.retries += 1
        await asyncio.sleep(0.5)
    raise RuntimeError(f"{method} {path}: the platform did not come back")


async def _login(http: httpx.AsyncClient, run: Run, user: str, password: str) -> dict[str, str]:
    answer = await _send(http, run, "POST", TOKEN_PATH, json=credentials(user, password))
    return bearer(token_of(answer))


def _plan(org_id: str, n: int) -> dict[str, Any]:
    params = {
        "location_id": catalog.WAREHOUSE_LOCATION_ID,
        "inventory_item_id": MUG,
        "available_adjustment": -1,
    }
    return {
        "orgId": org_id,
        "agentRef": "agent",
        "conversationId": str(uuid.uuid4()),
        "description": f"Soak write {n}",
        "steps": [
            {
                "id": "fix",
                "description": f"Lower the mug by 1 ({n})",
                "kind": "action",
                "tool": "shopify",
                "risk": "high",
                "parameters": {"action": "adjustInventoryLevel", "params": params},
            }
        ],
    }


async def _one_task(http: httpx.AsyncClient, run: Run, who: dict[str, Any], n: int) -> None:
    r = await _send(
        http, run, "POST", "/agentic/tasks", json=_plan(who["org"], n), headers=who["req"]
    )
    if r.status_code != 201:
        print(f"task {n}: {r.status_code} {r.text[:200]}", file=sys.stderr)
        return
    task_id = r.json()["id"]
    key = f"soak-{n}"
    began = time.monotonic()
    r = await _send(
        http,
        run,
        "POST",
        f"/agentic/tasks/{task_id}/steps/fix/approve",
        json={},
        headers={**who["expert"], "Idempotency-Key": key},
    )
    run.approve_ms.append((time.monotonic() - began) * 1000)
    if r.status_code == 200:
        run.approved.add(task_id)
        run.tasks[task_id] = time.monotonic()


async def _poll(http: httpx.AsyncClient, run: Run, who: dict[str, Any], shop: FakeShopify) -> None:
    """Watch the approved tasks to completion; resolve unknown outcomes from the upstream."""
    for task_id in [t for t in run.tasks if t not in run.done]:
        r = await _send(http, run, "GET", f"/agentic/tasks/{task_id}", headers=who["expert"])
        if r.status_code != 200:
            continue
        task = r.json()
        run.uids[task_id] = task.get("uid", "")
        status = task.get("status") or {}
        if status.get("phase") == "Completed":
            run.done[task_id] = time.monotonic()
            run.complete_s.append(run.done[task_id] - run.tasks[task_id])
            continue
        entry = next((e for e in status.get("steps") or [] if e["id"] == "fix"), {})
        run_state = (entry.get("execution") or {}).get("state")
        resolution = entry.get("resolution") or {}
        attempt = (entry.get("execution") or {}).get("attempt")
        if run_state == "OutcomeUnknown" and resolution.get("attempt") != attempt:
            seen = any(s.idempotency_key == f"step:{task['uid']}/fix" for s in shop.side_effects)
            outcome = "applied" if seen else "not_applied"
            await _send(
                http,
                run,
                "POST",
                f"/human-tasks/{task_id}/fix/resolve",
                json={"outcome": outcome, "note": "soak: read the upstream"},
                headers=who["expert2"],
            )
            run.resolved[outcome] += 1


def _rss(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _sample(run: Run, state: Path) -> None:
    pids = stack._components(state)
    for name in COMPONENTS:
        pid = pids.get(name)
        mib = _rss(pid) if pid else None
        if pid and mib is not None:
            run.rss.append((run.now(), name, pid, mib))


def _reap(pid: int) -> None:
    """Wait for the killed process to be gone (reaped, when this process started it)."""
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        deadline = time.monotonic() + 30
        while stack._alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)


def _port_free(port: int) -> None:
    """Wait until nothing listens on `port` any more (the killed session's sockets closed)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            stack._check_port(port, "soak")
            return
        except cluster.ClusterError:
            time.sleep(0.1)


async def _fault(run: Run, state: Path, info: cluster.ClusterInfo, which: str) -> None:
    """SIGKILL `which` and start it again as `make up` would; the time until it serves."""
    pid = stack._components(state)[which]
    os.killpg(pid, signal.SIGKILL)  # its session: the process and whatever it started
    began = time.monotonic()
    await asyncio.to_thread(_reap, pid)
    port = stack.PLATFORM_PORT if which == "platform" else stack.AGENT_PORT
    await asyncio.to_thread(_port_free, port)
    starts = stack._Starts(state)
    if which == "platform":
        await asyncio.to_thread(stack._start_platform, starts, info, state / "admin-password")
    else:
        await asyncio.to_thread(stack._start_agent, starts, info)
    run.faults.append((run.now(), which, time.monotonic() - began))
    print(f"[{run.now():6.0f}s] {which} killed and back in {time.monotonic() - began:.1f}s")


async def _drive(
    args: argparse.Namespace,
    run: Run,
    who: dict[str, Any],
    shop: FakeShopify,
    state: Path,
    info: cluster.ClusterInfo,
) -> None:
    end, n, pending = run.now() + args.minutes * 60, 0, set()
    next_task, next_fault, next_sample, next_poll = 0.0, args.fault_every, 0.0, 0.0
    faults, next_kind = [f for f in args.faults.split(",") if f != "none"], 0
    next_heap = 0.0 if args.platform_heap else float("inf")
    async with httpx.AsyncClient(timeout=30) as http:
        while run.now() < end:
            t = run.now()
            if t >= next_task:
                n += 1
                pending.add(asyncio.create_task(_one_task(http, run, who, n)))
                next_task += 1 / args.rate
            if t >= next_heap:
                os.kill(stack._components(state)["platform"], signal.SIGUSR1)
                next_heap += args.heap_every
            fault_due = faults and t >= next_fault
            if fault_due and not any(f.get_name() == "fault" for f in pending):
                which = faults[next_kind % len(faults)]
                next_kind += 1
                pending.add(asyncio.create_task(_fault(run, state, info, which), name="fault"))
                next_fault += args.fault_every
            if t >= next_sample:
                _sample(run, state)
                next_sample += args.sample_every
            if t >= next_poll:
                await _poll(http, run, who, shop)
                next_poll = run.now() + 1.0
            pending = {p for p in pending if not p.done()}
            await asyncio.sleep(0.05)
        await asyncio.gather(*pending)
        settle = time.monotonic() + args.settle
        while len(run.done) < len(run.tasks) and time.monotonic() < settle:
            await _poll(http, run, who, shop)
            await asyncio.sleep(1.0)
        _sample(run, state)
        if args.platform_heap:  # the last heap report, once the run has settled
            os.kill(stack._components(state)["platform"], signal.SIGUSR1)
        who["final"] = {
            t: (await _send(http, run, "GET", f"/agentic/tasks/{t}", headers=who["expert"])).json()
            for t in run.approved
        }


def _slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope, MiB per minute."""
    if len(points) < 3:
        return float("nan")
    mx = sum(p[0] for p in points) / len(points)
    my = sum(p[1] for p in points) / len(points)
    den = sum((p[0] - mx) ** 2 for p in points)
    return 60 * sum((p[0] - mx) * (p[1] - my) for p in points) / den if den else float("nan")


def _memory_report(run: Run, warm: float) -> None:
    print("\nRSS over time (MiB):")
    print("   t(s)  " + "  ".join(f"{c:>9}" for c in COMPONENTS))
    times = sorted({round(t) for t, *_ in run.rss})
    for t in times:
        row = {c: m for tt, c, _, m in run.rss if round(tt) == t}
        print(f"  {t:5d}  " + "  ".join(f"{row.get(c, float('nan')):9.1f}" for c in COMPONENTS))
    print(f"\nslope once warm (after {warm:.0f}s; per process lifetime, MiB/min):")
    for name in COMPONENTS:
        lives: dict[int, list[tuple[float, float]]] = {}
        for t, c, pid, mib in run.rss:
            if c == name and t >= warm:
                lives.setdefault(pid, []).append((t, mib))
        for pid, points in lives.items():
            span = points[-1][0] - points[0][0]
            print(
                f"  {name:9} pid {pid:7d}: {_slope(points):+6.2f} over {span:4.0f}s "
                f"({points[0][1]:.1f} -> {points[-1][1]:.1f} MiB, {len(points)} samples)"
            )


def _invariants(run: Run, who: dict[str, Any], shop: FakeShopify) -> None:
    final: dict[str, Any] = who["final"]
    lost = [
        t
        for t, task in final.items()
        if not any(
            e["id"] == "fix" and (e.get("decision") or {}).get("verdict") == "approve"
            for e in (task.get("status") or {}).get("steps") or []
        )
    ]
    keys = Counter(s.idempotency_key for s in shop.side_effects)
    approved_keys = {f"step:{task.get('uid')}/fix" for task in final.values()}
    print("\ninvariants:")
    print(f"  approvals answered 2xx:        {len(run.approved)}")
    print(f"  approvals lost:                {len(lost)} {lost[:5]}")
    print(f"  side effects upstream:         {len(shop.side_effects)}")
    print(f"  double executions:             {sum(1 for c in keys.values() if c > 1)}")
    print(f"  unapproved side effects:       {sum(1 for k in keys if k not in approved_keys)}")
    print(f"  approved, no side effect:      {sum(1 for k in approved_keys if k not in keys)}")
    print(f"  tasks not completed at the end: {len(run.tasks) - len(run.done)}")
    print(f"  unknown outcomes resolved from the upstream: {dict(run.resolved)}")


def _report(args: argparse.Namespace, run: Run, who: dict[str, Any], shop: FakeShopify) -> None:
    minutes = args.minutes
    print(
        f"\nsoak: {minutes} min, {args.rate} task/s offered, "
        f"faults ({args.faults}) every {args.fault_every}s"
    )
    print(
        f"  tasks approved: {len(run.approved)}, completed: {len(run.done)} "
        f"({len(run.done) / minutes:.1f}/min); requests retried while down: {run.retries}"
    )
    print(
        f"  approval call p50/p95: {_pct(run.approve_ms, 0.5):.0f} / "
        f"{_pct(run.approve_ms, 0.95):.0f} ms"
    )
    print(
        f"  approval to completion p50/p95: {_pct(run.complete_s, 0.5):.1f} / "
        f"{_pct(run.complete_s, 0.95):.1f} s"
    )
    for t, what, took in run.faults:
        print(f"  fault at {t:5.0f}s: {what} SIGKILL, serving again after {took:.1f}s")
    _memory_report(run, min(60.0, minutes * 60 / 5))
    _invariants(run, who, shop)


async def _setup(state: Path, shop: FakeShopify) -> dict[str, Any]:
    run = Run()
    admin_pw = (state / "admin-password").read_text().strip()
    expert_pw = (state / "expert-password").read_text().strip()
    async with httpx.AsyncClient(timeout=30) as http:
        admin = await _login(http, run, "admin", admin_pw)
        orgs = (await _send(http, run, "GET", "/orgs", headers=admin)).json()
        items = orgs["items"] if isinstance(orgs, dict) else orgs
        org = next(o["id"] for o in items if o["slug"] == stack.DEMO_SLUG)
        r = await _send(
            http,
            run,
            "PUT",
            f"/orgs/{org}/integrations/shopify",
            json={"credentials": shop.credentials()},
            headers=admin,
        )
        r.raise_for_status()
        users = {}
        for name, role in (("soak-req", "operator"), ("soak-expert2", "expert")):
            password = f"pw-{name}-0123456789abcdef"
            await _send(
                http,
                run,
                "POST",
                "/users",
                headers=admin,
                json={"username": name, "password": password, "role": role, "org_ids": [org]},
            )
            users[name] = await _login(http, run, name, password)
        return {
            "org": org,
            "req": users["soak-req"],
            "expert2": users["soak-expert2"],
            "expert": await _login(http, run, stack.DEMO_EXPERT, expert_pw),
        }


def _heap_on_platform(folder: str) -> None:
    """Start the platform (and only it) with `bench/heap_hook` and its folder."""
    spawn = stack._Starts.spawn

    def traced(
        self: stack._Starts, name: str, args: list[str], env: dict[str, str], ports: tuple[int, ...]
    ) -> int:
        if name == "platform":
            path = os.pathsep.join(p for p in (str(HEAP_HOOK), os.environ.get("PYTHONPATH")) if p)
            env = {**env, "PYTHONPATH": path, "HUMANWORK_HEAP_DIR": folder}
            env["HUMANWORK_HEAP_TRACE"] = HEAP_TRACE  # `late`: traced from the first report
            env["HUMANWORK_HEAP_TYPES"] = HEAP_TYPES
        return spawn(self, name, args, env, ports)

    stack._Starts.spawn = traced  # type: ignore[method-assign]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=0.5, help="tasks per second")
    parser.add_argument("--fault-every", type=float, default=150.0, help="seconds")
    parser.add_argument("--sample-every", type=float, default=15.0, help="RSS, seconds")
    parser.add_argument(
        "--settle",
        type=float,
        default=420.0,
        help="seconds to wait for the last tasks (a claim left by a killed "
        "platform turns unknown after 300 s)",
    )
    parser.add_argument("--faults", default="agent,platform", help="killed in turn, or none")
    parser.add_argument("--platform-heap", metavar="DIR", help="trace the platform's heap")
    parser.add_argument("--heap-every", type=float, default=60.0, help="heap report, seconds")
    args = parser.parse_args()
    if args.platform_heap:
        _heap_on_platform(str(Path(args.platform_heap).resolve()))
    with tempfile.TemporaryDirectory(prefix="humanwork-soak-") as tmp:
        state = Path(tmp) / "stack"
        try:
            stack.up(state, "process")
            info = cluster.status(state)
            assert info is not None
            fakes = stack._components(state)["fakes"]
            cluster.stop_process(fakes)  # this process's fake Shopify takes the port
            with FakeShopify(port=stack.SHOPIFY_PORT) as shop:
                who = asyncio.run(_setup(state, shop))
                run = Run()
                asyncio.run(_drive(args, run, who, shop, state, info))
                _report(args, run, who, shop)
        finally:
            stack.down(state)


if __name__ == "__main__":
    main()
