"""Benchmark: what the tool proxy costs a call, native and MCP, beside the same call made
straight to the fake upstream in the same run, with receipt signing off and on.

On a scratch local control plane and a throwaway PostgreSQL (`_kit.scratch_platform`), the
operator runs as a process (it mints the agent's token), the platform API as a real server
under its ServiceAccount, and the fake Shopify and Amazon as a process of their own
(`python -m humanwork_dev.fakes`). The org `bench` enables Shopify with credentials that
point at the fake; its AgentInstance `agent` lists Shopify. Then, once with receipt
signing off and once on (the platform restarted in place, with or without
`HUMANWORK_RECEIPT_KEY_FILE`), CLIENTS concurrent callers make the read
`shopify.getInventoryLevels` for SECONDS in each of three ways:

- direct: the platform's own Shopify adapter, in this process, through the platform's
  egress client, straight to the fake: the very upstream request the proxy makes;
- native: `POST /v1/agent-api/tools/shopify` with the agent's token (every check, the
  credentials decrypted, the audit row, the receipt when signing is on);
- mcp: `POST /v1/agent-api/mcp`, a stateless `tools/call` of `shopify_getInventoryLevels`.

Prints, per phase, calls per second, p50 and p95 of one call, errors, the platform
process's CPU per call (what the proxy itself costs, less sensitive to the machine's other
load than the rate) and the load average; then the ratios: each path's rate over the direct
rate of the same signing mode, and signing on over off (rate and CPU per call). With
`--rounds N` the two modes alternate N times (off, on, off, on, ...), the figures summed
over the rounds, so that a drift of the machine's load does not fall on one mode. A read
is signed like a write (every answered call gets a receipt).
Prints and asserts nothing else; nothing of it runs in the test suite:

    nice -n 10 .venv/bin/python bench/proxy.py [--seconds 20] [--clients 8] [--rounds 1]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from _kit import Scratch, agent_instance, bench_org, login, scratch_platform
from kubernetes import client as kclient
from kubernetes import config as kconfig

from humanwork_core.tokens import generate_signing_key
from humanwork_dev.fakes import catalog
from humanwork_dev.processes import OperatorProcess
from platform_api.tools.upstreams.egress import Egress, EgressClient, EgressPolicy
from platform_api.tools.upstreams.shopify import ShopifyAdapter

PARAMS = {"inventory_item_ids": [catalog.BY_SKU[catalog.DISCREPANT_SKU].inventory_item_id]}
ACTION = "getInventoryLevels"
LOOPBACK = ["127.0.0.1/32"]
CREDENTIALS_KEY = base64.b64encode(bytes(range(32))).decode()
PLATFORM_ENV = {
    "HUMANWORK_CREDENTIALS_KEYS": json.dumps({"k1": CREDENTIALS_KEY}),
    "HUMANWORK_CREDENTIALS_ACTIVE_KEY": "k1",
    "HUMANWORK_UPSTREAM_ALLOWED_ENDPOINTS": json.dumps(LOOPBACK),
}
MCP_ACCEPT = "application/json, text/event-stream"


@dataclass
class Phase:
    """One phase's calls: each call's seconds, and the errors."""

    name: str
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    load: float = 0.0
    cpu: float = 0.0
    """CPU seconds the platform process spent during the phase."""

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.seconds if self.seconds else 0.0

    def pct(self, q: float) -> float:
        if len(self.latencies) < 2:
            return self.latencies[0] if self.latencies else 0.0
        return statistics.quantiles(self.latencies, n=100)[int(q) - 1]

    @property
    def cpu_per_call(self) -> float:
        return self.cpu / len(self.latencies) if self.latencies else 0.0

    def add(self, other: Phase) -> None:
        self.seconds += other.seconds
        self.latencies += other.latencies
        self.errors += other.errors
        self.cpu += other.cpu
        self.load = max(self.load, other.load)

    def line(self) -> str:
        return (
            f"{self.name:<14} {self.rate:8.1f} calls/s  p50 {self.pct(50) * 1000:7.1f} ms  "
            f"p95 {self.pct(95) * 1000:7.1f} ms  calls {len(self.latencies):6d}  "
            f"errors {self.errors:4d}  platform CPU {self.cpu_per_call * 1000:6.2f} ms/call  "
            f"load {self.load:5.2f}"
        )


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


Call = Callable[[], Awaitable[bool]]


async def _run(phase: Phase, call: Call, clients: int, seconds: float, pid: int) -> Phase:
    """CLIENTS loops making `call` until SECONDS have passed (`pid`: the platform's)."""
    until = time.perf_counter() + seconds

    async def loop() -> None:
        while time.perf_counter() < until:
            started = time.perf_counter()
            ok = await call()
            if ok:
                phase.latencies.append(time.perf_counter() - started)
            else:
                phase.errors += 1

    started, cpu = time.perf_counter(), _cpu_seconds(pid)
    await asyncio.gather(*(loop() for _ in range(clients)))
    phase.seconds = time.perf_counter() - started
    phase.cpu = _cpu_seconds(pid) - cpu
    phase.load = os.getloadavg()[0]
    return phase


def _direct(credentials: dict[str, Any]) -> tuple[Call, EgressClient]:
    adapter = ShopifyAdapter()
    upstream = EgressClient(Egress(EgressPolicy.parse(LOOPBACK)), timeout=10.0)

    async def call() -> bool:
        try:
            await adapter.call(
                ACTION, dict(PARAMS), credentials, client=upstream, idempotency_key=""
            )
        except Exception:
            return False
        return True

    return call, upstream


def _native(http: httpx.AsyncClient, token: str, signing: str) -> Call:
    """The native call; the first one also checks that a receipt comes back exactly when
    signing is on."""
    headers = {"Authorization": f"Bearer {token}"}
    body = {"action": ACTION, "params": PARAMS}
    checked: list[bool] = []

    async def call() -> bool:
        r = await http.post("/v1/agent-api/tools/shopify", json=body, headers=headers)
        if not checked and r.status_code == 200:
            signed = r.json().get("receipt") is not None
            if signed != (signing == "on"):
                raise SystemExit(f"signing {signing}, but the answer's receipt is {signed}")
            checked.append(True)
        return r.status_code == 200

    return call


def _mcp(http: httpx.AsyncClient, token: str) -> Call:
    headers = {"Authorization": f"Bearer {token}", "Accept": MCP_ACCEPT}
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": f"shopify_{ACTION}", "arguments": PARAMS},
    }

    async def call() -> bool:
        r = await http.post("/v1/agent-api/mcp", json=message, headers=headers)
        return r.status_code == 200 and not r.json().get("result", {}).get("isError", True)

    return call


@dataclass(frozen=True)
class Run:
    """What every phase is run with: the platform's URL and pid, the agent's token, the
    fake's credentials, the callers and the seconds of a phase."""

    url: str
    pid: int
    token: str
    credentials: dict[str, Any]
    clients: int
    seconds: float


async def _mode(run: Run, signing: str) -> list[Phase]:
    """The three phases with the platform as it runs now (after one warm-up call each)."""
    limits = httpx.Limits(max_connections=run.clients, max_keepalive_connections=run.clients)
    async with httpx.AsyncClient(base_url=run.url, timeout=30, limits=limits) as http:
        direct, upstream = _direct(run.credentials)
        calls = {
            "direct": direct,
            "native": _native(http, run.token, signing),
            "mcp": _mcp(http, run.token),
        }
        for name, call in calls.items():
            if not await call():
                raise SystemExit(f"the {name} call fails before the run (signing {signing})")
        phases = []
        for name, call in calls.items():
            phase = await _run(
                Phase(f"{name} ({signing})"), call, run.clients, run.seconds, run.pid
            )
            print(phase.line(), flush=True)
            phases.append(phase)
        await upstream.aclose()
    return phases


def _agent_token(scratch: Scratch, org_id: str, namespace: str) -> str:
    """The AgentInstance `agent` of the bench org (Shopify listed), once the operator
    minted its token: the token."""
    api = kconfig.new_client_from_config(config_file=scratch.info.kubeconfig)  # type: ignore[no-untyped-call]
    core = kclient.CoreV1Api(api)
    core.create_namespaced_secret(
        namespace,
        kclient.V1Secret(metadata=kclient.V1ObjectMeta(name="llm"), string_data={"api-key": "k"}),
    )
    instance = agent_instance(namespace, org_id)
    instance["spec"]["enabledTools"] = ["shopify"]
    custom = kclient.CustomObjectsApi(api)
    custom.create_namespaced_custom_object(
        "humanwork.io", "v1alpha1", namespace, "agentinstances", instance
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        got = custom.get_namespaced_custom_object(
            "humanwork.io", "v1alpha1", namespace, "agentinstances", "agent"
        )
        if ((got.get("status") or {}).get("token") or {}).get("jti"):
            secret = core.read_namespaced_secret("agent-agent-token", namespace)
            return base64.b64decode(secret.data["token"]).decode()
        time.sleep(0.5)
    raise SystemExit("the operator minted no token for the bench agent within 180 s")


def _fakes(folder: Path) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
    """The fake upstreams as a process of their own; their Shopify credentials."""
    credentials = folder / "fakes.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "humanwork_dev.fakes", "--credentials", str(credentials)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not credentials.exists() or not credentials.read_text():
        if time.monotonic() > deadline or proc.poll() is not None:
            raise SystemExit("the fake upstreams did not start")
        time.sleep(0.2)
    shopify: dict[str, Any] = json.loads(credentials.read_text())["shopify"]
    return proc, shopify


def _setup(scratch: Scratch, shopify: dict[str, Any]) -> str:
    """The org `bench`, Shopify enabled with the fake's credentials, its agent's token."""
    with httpx.Client(base_url=scratch.platform.url, timeout=60) as http:
        org_id = bench_org(http, [])
        admin = login(http, "admin")
        for path, body in (
            (f"/orgs/{org_id}/tool-permissions/shopify", {"enabled": True}),
            (f"/orgs/{org_id}/integrations/shopify", {"credentials": shopify}),
        ):
            http.put(path, json=body, headers=admin).raise_for_status()
    return _agent_token(scratch, org_id, "org-bench")


def _ratios(phases: dict[str, Phase]) -> None:
    print("\nratios (calls per second)")
    for signing in ("off", "on"):
        direct = phases[f"direct ({signing})"].rate
        for path in ("native", "mcp"):
            rate = phases[f"{path} ({signing})"].rate
            print(f"  {path} / direct, signing {signing}: {rate / direct:.3f}")
    for path in ("native", "mcp"):
        on, off = phases[f"{path} (on)"], phases[f"{path} (off)"]
        print(
            f"  {path}: signing on / off: rate {on.rate / off.rate:.3f}, platform CPU per call "
            f"{on.cpu_per_call / off.cpu_per_call:.3f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description="the tool proxy's cost, native and MCP")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()}; {os.cpu_count()} cores", flush=True)
    manifests = ("manifests/base/operator",)
    with scratch_platform("humanwork-bench-proxy-", PLATFORM_ENV, manifests) as scratch:
        operator = OperatorProcess(
            scratch.info.kubeconfig, scratch.info.kubectl, scratch.state / "operator"
        )
        operator.start()
        fakes, shopify = _fakes(scratch.state)
        try:
            token = _setup(scratch, shopify)
            key = scratch.state / "receipt-key.pem"
            key.write_bytes(generate_signing_key().to_pem())
            phases: dict[str, Phase] = {}
            platform, port = scratch.platform, scratch.platform.port
            for signing in ("off", "on") * args.rounds:
                platform.stop()
                extra = {"HUMANWORK_RECEIPT_KEY_FILE": str(key)} if signing == "on" else {}
                platform.start(port=port, env=extra)
                assert platform.proc is not None
                run = Run(
                    platform.url, platform.proc.pid, token, shopify, args.clients, args.seconds
                )
                for phase in asyncio.run(_mode(run, signing)):
                    phases.setdefault(phase.name, Phase(phase.name)).add(phase)
            if args.rounds > 1:
                print(f"\nsummed over {args.rounds} rounds")
                for phase in phases.values():
                    print(phase.line())
            _ratios(phases)
        finally:
            fakes.terminate()
            fakes.wait(10)
            operator.stop()
    print(f"load average at the end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
