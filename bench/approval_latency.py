"""Benchmark: from an expert's approval to the agent executing the step.

On a scratch local control plane: the operator, the platform API (a real server on a
throwaway PostgreSQL) and an org's agent (run with exactly what its pod spec gives it),
with Shopify served by the local fake. STEPS one-step tasks (default 200; the step reads
Shopify's products through the tool proxy) are created and approved one after another
through the platform API. A watch on the AgenticTasks records when each step's execution
is first seen `Running` and `Succeeded`; the figures are the times from the approve
response to those two moments (p50, p95, p99), and the agent's resident memory when idle.

Run by hand or with `make bench`; it prints and asserts nothing.

    .venv/bin/python bench/approval_latency.py [--steps 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import httpx
from _kit import GROUP, INSTANCES, JWT_SECRET, PASSWORD, VERSION, agent_instance, bench_org, login
from kubernetes import client, config, watch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from humanwork_dev import cluster, stack  # noqa: E402
from humanwork_dev.fakes.shopify import FakeShopify  # noqa: E402
from humanwork_dev.postgres import PostgresServer  # noqa: E402
from humanwork_dev.processes import AgentProcess, OperatorProcess, PlatformProcess  # noqa: E402

CREDENTIALS_KEY = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="  # 32 bytes, bench only
STEP = {
    "id": "read",
    "description": "Read the store's products",
    "kind": "action",
    "tool": "shopify",
    "parameters": {"action": "listProducts", "params": {"limit": 5}},
    "risk": "low",
}


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _ms(values: list[float]) -> str:
    return (
        f"p50 {_pct(values, 0.5) * 1000:.0f} ms, p95 {_pct(values, 0.95) * 1000:.0f} ms, "
        f"p99 {_pct(values, 0.99) * 1000:.0f} ms (median {statistics.median(values) * 1000:.0f})"
    )


class Observer:
    """Watches the org's AgenticTasks; the first moment each step state was seen."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.seen: dict[tuple[str, str], float] = {}
        self.changed = threading.Condition()
        self._stop = False
        self._thread = threading.Thread(target=self._run, args=(api, namespace), daemon=True)
        self._thread.start()

    def _run(self, api: client.ApiClient, namespace: str) -> None:
        objects = client.CustomObjectsApi(api)
        while not self._stop:
            try:
                self._watch(objects, namespace)
            except Exception:  # the watch broke (or the cluster is going away): watch again
                time.sleep(0.5)

    def _watch(self, objects: client.CustomObjectsApi, namespace: str) -> None:
        stream = watch.Watch().stream(
            objects.list_namespaced_custom_object,
            "humanwork.io",
            "v1alpha1",
            namespace,
            "agentictasks",
            timeout_seconds=60,
        )
        for event in stream:
            obj = event["object"]
            now = time.monotonic()
            name = obj["metadata"]["name"]
            for entry in (obj.get("status") or {}).get("steps") or []:
                state = (entry.get("execution") or {}).get("state")
                if state:
                    with self.changed:
                        self.seen.setdefault((name, state), now)
                        self.changed.notify_all()

    def stop(self) -> None:
        self._stop = True

    def wait(self, name: str, state: str, timeout: float = 60) -> float:
        deadline = time.monotonic() + timeout
        with self.changed:
            while (name, state) not in self.seen:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{name} never reached {state}")
                self.changed.wait(left)
            return self.seen[(name, state)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hw-bench-approval-") as tmp:
        state = Path(tmp)
        info = cluster.up(state / "cluster")
        postgres = PostgresServer()
        postgres.start()
        running: list[OperatorProcess | PlatformProcess | AgentProcess] = []
        try:
            stack._install(info)
            time.sleep(2)  # admission policies become active
            operator = OperatorProcess(info.kubeconfig, info.kubectl, state / "operator")
            operator.start()
            running.append(operator)
            url = asyncio.run(postgres.create_database("bench"))
            platform = PlatformProcess(
                info.kubeconfig,
                info.kubectl,
                state / "platform",
                env={
                    "HUMANWORK_DATABASE_URL": url,
                    "HUMANWORK_ADMIN_PASSWORD": PASSWORD,
                    "HUMANWORK_JWT_SECRET": JWT_SECRET,
                    "HUMANWORK_CREDENTIALS_KEYS": json.dumps({"k1": CREDENTIALS_KEY}),
                    "HUMANWORK_CREDENTIALS_ACTIVE_KEY": "k1",
                    # the fake Shopify below listens on loopback
                    "HUMANWORK_UPSTREAM_ALLOWED_ENDPOINTS": json.dumps(["127.0.0.1/32"]),
                },
            )
            platform.start()
            running.append(platform)
            with FakeShopify() as shop:
                _run(args, info, platform, shop, state, running)
        finally:
            for proc in reversed(running):
                proc.stop()
            postgres.stop()
            cluster.down(state / "cluster")


def _run(
    args: argparse.Namespace,
    info: cluster.ClusterInfo,
    platform: PlatformProcess,
    shop: FakeShopify,
    state: Path,
    running: list[OperatorProcess | PlatformProcess | AgentProcess],
) -> None:
    http = httpx.Client(base_url=platform.url, timeout=30)
    org_id, ns = bench_org(http, [("requester", "operator"), ("expert", "expert")]), "org-bench"
    requester, expert = login(http, "requester"), login(http, "expert")
    admin = login(http, "admin")
    http.put(
        f"/orgs/{org_id}/tool-permissions/shopify", json={"enabled": True}, headers=admin
    ).raise_for_status()
    http.put(
        f"/orgs/{org_id}/integrations/shopify",
        json={"credentials": shop.credentials()},
        headers=admin,
    ).raise_for_status()
    api = config.new_client_from_config(config_file=info.kubeconfig)
    agent = _ready_agent(api, info, ns, org_id, state, platform)
    running.append(agent)
    time.sleep(3)
    _measure(args, api, http, (org_id, ns), (requester, expert), agent, shop)


def _ready_agent(
    api: client.ApiClient,
    info: cluster.ClusterInfo,
    ns: str,
    org_id: str,
    state: Path,
    platform: PlatformProcess,
) -> AgentProcess:
    """The org's AgentInstance, Ready, and its agent running as a local process."""
    core, objects = client.CoreV1Api(api), client.CustomObjectsApi(api)
    core.create_namespaced_secret(
        ns,
        client.V1Secret(
            metadata=client.V1ObjectMeta(name="llm"), string_data={"api-key": "sk-bench"}
        ),
    )
    instance = agent_instance(ns, org_id)
    instance["spec"].update(
        specialist={"name": "Bench", "systemPrompt": "You read products."},
        model="offline",
        enabledTools=["shopify"],
        maxConcurrentTasks=4,
    )
    objects.create_namespaced_custom_object(GROUP, VERSION, ns, INSTANCES, instance)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        got = objects.get_namespaced_custom_object(GROUP, VERSION, ns, INSTANCES, "agent")
        if (got.get("status") or {}).get("phase") == "Ready":
            break
        time.sleep(0.5)
    agent = AgentProcess(info.kubeconfig, ns, "agent", state / "agent", platform.url)
    agent.start()
    return agent


def _measure(
    args: argparse.Namespace,
    api: client.ApiClient,
    http: httpx.Client,
    org: tuple[str, str],
    users: tuple[dict[str, str], dict[str, str]],
    agent: AgentProcess,
    shop: FakeShopify,
) -> None:
    """`args.steps` one-step tasks filed and approved one after another, timed from each
    approval's answer to the execution's Running and Succeeded."""
    (org_id, ns), (requester, expert) = org, users
    idle_before = agent.rss_bytes()

    observer = Observer(api, ns)
    time.sleep(1)  # the watch is established
    to_start: list[float] = []
    to_done: list[float] = []
    t_all = time.monotonic()
    for _ in range(args.steps):
        body = {
            "orgId": org_id,
            "agentRef": "agent",
            "conversationId": str(uuid.uuid4()),
            "description": "bench: read the products",
            "steps": [STEP],
        }
        created = http.post("/agentic/tasks", json=body, headers=requester)
        created.raise_for_status()
        task_id = created.json()["id"]
        name = task_id.split("/")[1]
        r = http.post(f"/agentic/tasks/{task_id}/steps/read/approve", json={}, headers=expert)
        approved_at = time.monotonic()
        r.raise_for_status()
        started = observer.wait(name, "Running")
        done = observer.wait(name, "Succeeded")
        to_start.append(max(0.0, started - approved_at))
        to_done.append(max(0.0, done - approved_at))
    elapsed = time.monotonic() - t_all
    observer.stop()
    time.sleep(5)
    idle_after = agent.rss_bytes()
    print(f"approval latency over {args.steps} steps ({elapsed:.0f}s in all):")
    print(f"  approve response -> execution Running:   {_ms(to_start)}")
    print(f"  approve response -> execution Succeeded: {_ms(to_done)}")
    print(
        f"  agent resident memory idle: {idle_before / 2**20:.0f} MiB at start, "
        f"{idle_after / 2**20:.0f} MiB after {args.steps} steps"
    )
    print(f"  Shopify reads through the proxy: {len(shop.requests_to('products.json'))}")


if __name__ == "__main__":
    main()
