"""Benchmark: the platform's share of a client's two waits, each beside its floor.

1. Client message -> plan the conversation shows (default). The platform app in process
   (its dispatcher loop running) on a throwaway PostgreSQL; an org, a client and a
   conversation made through the API. The org's agent is an in-process fake behind the
   dispatcher's port that classifies every message as agentic and files a plan at once
   (the fake model: no language model time), and records how long the agent itself took
   (the floor: the agent's own time for the same request). MESSAGES client messages
   (default 50) are posted one after another through the client's endpoint; for each,
   the time from the POST's answer until the client reads the `plan_waiting` system
   message in its conversation, beside the agent's own time, p50 and p95.
2. Approval -> result visible in the client's stream (`--approvals N`). On a scratch
   control plane: the operator, the platform API (a real server on a throwaway
   PostgreSQL) and the org's real agent process, Shopify served by the local fake (as in
   `bench/approval_latency.py`). A client opens its conversation's stream; N one-step
   plans of that conversation (the step reads Shopify's products through the tool proxy)
   are approved one after another by an expert; for each, the time from the approve
   response until the client's stream delivers the step's `step_executed` system message
   (with its result), beside the floor: the same approval until the agent's execution is
   `Succeeded` in the task (a watch on the AgenticTasks), p50 and p95.

Run by hand; it prints and asserts nothing.

    .venv/bin/python bench/client_dispatch.py [--messages 50]
    .venv/bin/python bench/client_dispatch.py --approvals 20
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from _kit import JWT_SECRET, PASSWORD, bench_org, login, login_async
from approval_latency import CREDENTIALS_KEY, STEP, Observer
from kubernetes import client as kclient
from kubernetes import config

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from humanwork_dev import cluster, stack  # noqa: E402
from humanwork_dev.fakes.agents import FakeAgents  # noqa: E402
from humanwork_dev.fakes.catalog import SEED_REQUEST  # noqa: E402
from humanwork_dev.fakes.shopify import FakeShopify  # noqa: E402
from humanwork_dev.postgres import PostgresServer  # noqa: E402
from humanwork_dev.processes import AgentProcess, OperatorProcess, PlatformProcess  # noqa: E402
from platform_api.agents.commands import AgentTarget  # noqa: E402
from platform_api.app import create_app  # noqa: E402
from platform_api.db import make_engine, migrate  # noqa: E402
from platform_api.settings import Settings  # noqa: E402


class TimedAgents(FakeAgents):
    """The fake agent, every message agentic, its own time per command recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.spent: dict[str, float] = {}

    async def send(
        self,
        target: AgentTarget,
        path: str,
        payload: dict[str, Any],
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        started = time.perf_counter()
        answer = await super().send(target, path, payload, idempotency_key)
        conversation = str(payload.get("conversationId"))
        self.spent[conversation] = self.spent.get(conversation, 0.0) + (
            time.perf_counter() - started
        )
        return answer


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _ms(values: list[float]) -> str:
    return f"p50 {_pct(values, 0.5) * 1000:.1f} ms, p95 {_pct(values, 0.95) * 1000:.1f} ms"


async def _one(http: httpx.AsyncClient, org: str, client: dict[str, str]) -> tuple[str, float]:
    r = await http.post(f"/orgs/{org}/conversations", json={"subject": "October"}, headers=client)
    cid = r.json()["id"]
    r = await http.post(
        f"/orgs/{org}/conversations/{cid}/messages", json={"content": SEED_REQUEST}, headers=client
    )
    posted = time.perf_counter()
    while True:
        r = await http.get(f"/orgs/{org}/conversations/{cid}", headers=client)
        if any((m.get("meta") or {}).get("event") == "plan_waiting" for m in r.json()["messages"]):
            return cid, time.perf_counter() - posted
        await asyncio.sleep(0.005)


async def _client_of_new_org(http: httpx.AsyncClient) -> tuple[str, dict[str, str]]:
    """An org `bench` and the headers of a client of it, made as the admin would."""
    root = await login_async(http, "admin")
    r = await http.post("/orgs", json={"slug": "bench", "name": "Bench"}, headers=root)
    r.raise_for_status()
    org = str(r.json()["id"])
    user = {"username": "client-bench", "password": PASSWORD, "role": "client", "org_ids": [org]}
    (await http.post("/users", json=user, headers=root)).raise_for_status()
    return org, await login_async(http, "client-bench")


async def main(postgres: PostgresServer, messages: int) -> None:
    url = await postgres.create_database(f"bench_{uuid.uuid4().hex[:8]}")
    engine = make_engine(url)
    await migrate(engine)
    await engine.dispose()
    settings = Settings(
        database_url=url,
        admin_password=PASSWORD,
        jwt_secret=JWT_SECRET,
        credentials_keys={"k1": CREDENTIALS_KEY},
        credentials_active_key="k1",
        oidc_jwks_url=None,
        access_map=None,
        dispatch_interval_seconds=0.02,
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        agent = TimedAgents()
        app.state.dispatcher.agents = agent
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://platform") as http:
            org, client = await _client_of_new_org(http)
            timings = [await _one(http, org, client) for _ in range(messages)]
    totals = [t for _, t in timings]
    floors = [agent.spent.get(cid, 0.0) for cid, _ in timings]
    print(f"client message -> plan visible to the client ({messages} messages, fake model)")
    print(f"  end to end:              {_ms(totals)}")
    print(f"  the agent's own time:    {_ms(floors)} (the floor)")
    print(f"  dispatch interval:       {settings.dispatch_interval_seconds * 1000:.0f} ms")


# --- approval -> result visible in the client's stream ------------------------------------


class ClientStream:
    """A client's stream of one conversation (in a thread): when each task's
    `step_executed` message first arrived."""

    def __init__(self, base: str, path: str, headers: dict[str, str]) -> None:
        self.told: dict[str, float] = {}
        self.changed = threading.Condition()
        self.opened = threading.Event()
        args = (base, path, {**headers, "Accept": "text/event-stream"})
        threading.Thread(target=self._run, args=args, daemon=True).start()

    def _run(self, base: str, path: str, headers: dict[str, str]) -> None:
        with contextlib.suppress(httpx.HTTPError):  # the platform stops at the end
            self._read(base, path, headers)

    def _read(self, base: str, path: str, headers: dict[str, str]) -> None:
        with (
            httpx.Client(base_url=base, timeout=None) as http,
            http.stream("GET", path, headers=headers) as answer,
        ):
            text = ""
            for chunk in answer.iter_text():
                text += chunk
                while "\n\n" in text:
                    block, text = text.split("\n\n", 1)
                    self._take(block.split("\n"))

    def _take(self, lines: list[str]) -> None:
        now = time.monotonic()
        if "event: task" in lines:
            self.opened.set()  # every task once when the stream opens
        data = next((line[6:] for line in lines if line.startswith("data: ")), None)
        if "event: message" not in lines or data is None:
            return
        meta = json.loads(data).get("meta") or {}
        if meta.get("event") == "step_executed":
            with self.changed:
                self.told.setdefault(str(meta.get("task")), now)
                self.changed.notify_all()

    def wait(self, name: str, timeout: float = 120) -> float:
        deadline = time.monotonic() + timeout
        with self.changed:
            while name not in self.told:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no step_executed of {name} in the client's stream")
                self.changed.wait(left)
            return self.told[name]


@contextmanager
def _stack(state: Path) -> Iterator[tuple[cluster.ClusterInfo, PlatformProcess, FakeShopify]]:
    """A scratch control plane with the operator, the platform serving on a throwaway
    PostgreSQL and the fake Shopify (as `bench/approval_latency.py` runs them)."""
    info = cluster.up(state / "cluster")
    postgres = PostgresServer()
    postgres.start()
    running: list[OperatorProcess | PlatformProcess] = []
    try:
        stack._install(info)
        time.sleep(2)  # admission policies become active
        operator = OperatorProcess(info.kubeconfig, info.kubectl, state / "operator")
        running.append(operator)
        operator.start(timeout=300)
        env = {
            "HUMANWORK_DATABASE_URL": asyncio.run(postgres.create_database("bench")),
            "HUMANWORK_ADMIN_PASSWORD": PASSWORD,
            "HUMANWORK_JWT_SECRET": JWT_SECRET,
            "HUMANWORK_CREDENTIALS_KEYS": json.dumps({"k1": CREDENTIALS_KEY}),
            "HUMANWORK_CREDENTIALS_ACTIVE_KEY": "k1",
            "HUMANWORK_UPSTREAM_ALLOWED_ENDPOINTS": json.dumps(["127.0.0.1/32"]),
        }
        platform = PlatformProcess(info.kubeconfig, info.kubectl, state / "platform", env=env)
        running.append(platform)
        try:
            platform.start(timeout=300)  # a loaded machine starts it slowly
        except RuntimeError:
            print(platform.log.read_text(errors="replace")[-3000:], file=sys.stderr)
            raise
        with FakeShopify() as shop:
            yield info, platform, shop
    finally:
        for proc in reversed(running):
            proc.stop()
        postgres.stop()
        cluster.down(state / "cluster")


def _org(http: httpx.Client, shop: FakeShopify) -> tuple[str, dict[str, dict[str, str]]]:
    """The bench org with Shopify enabled, and its people's headers (a requester, an
    expert and a client)."""
    people = {"requester": "operator", "expert": "expert", "client": "client"}
    org_id = bench_org(http, list(people.items()))
    admin = login(http, "admin")
    tool = f"/orgs/{org_id}/tool-permissions/shopify"
    http.put(tool, json={"enabled": True}, headers=admin).raise_for_status()
    http.put(
        f"/orgs/{org_id}/integrations/shopify",
        json={"credentials": shop.credentials()},
        headers=admin,
    ).raise_for_status()
    return org_id, {username: login(http, username) for username in people}


def _agent(info: cluster.ClusterInfo, org_id: str, ns: str) -> kclient.ApiClient:
    """The org's AgentInstance, Ready; the API client used."""
    api = config.new_client_from_config(config_file=info.kubeconfig)
    secret = kclient.V1Secret(
        metadata=kclient.V1ObjectMeta(name="llm"), string_data={"api-key": "sk-bench"}
    )
    kclient.CoreV1Api(api).create_namespaced_secret(ns, secret)
    objects = kclient.CustomObjectsApi(api)
    spec = {
        "orgId": org_id,
        "specialist": {"name": "Bench", "systemPrompt": "You read products."},
        "model": "offline",
        "enabledTools": ["shopify"],
        "maxConcurrentTasks": 4,
        "llm": {
            "baseURL": "https://llm.example/v1",
            "apiKeySecretRef": {"name": "llm", "key": "api-key"},
        },
    }
    body = {"apiVersion": "humanwork.io/v1alpha1", "kind": "AgentInstance"}
    body |= {"metadata": {"name": "agent"}, "spec": spec}
    objects.create_namespaced_custom_object("humanwork.io", "v1alpha1", ns, "agentinstances", body)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        got = objects.get_namespaced_custom_object(
            "humanwork.io", "v1alpha1", ns, "agentinstances", "agent"
        )
        if (got.get("status") or {}).get("phase") == "Ready":
            break
        time.sleep(0.5)
    return api


def approvals(count: int) -> None:
    """Approval -> `step_executed` in the client's stream, beside approval -> Succeeded."""
    with tempfile.TemporaryDirectory(prefix="hw-bench-client-") as tmp:
        state = Path(tmp)
        with _stack(state) as (info, platform, shop):
            http = httpx.Client(base_url=platform.url, timeout=30)
            org_id, who = _org(http, shop)
            api = _agent(info, org_id, "org-bench")
            agent = AgentProcess(
                info.kubeconfig, "org-bench", "agent", state / "agent", platform.url
            )
            agent.start(timeout=300)
            try:
                totals, floors = _approve_all(http, api, org_id, who, platform.url, count)
            finally:
                agent.stop()
    print(f"approval -> result visible in the client's stream ({count} steps, fake Shopify)")
    print(f"  end to end:                     {_ms(totals)}")
    print(f"  approval -> execution Succeeded: {_ms(floors)} (the floor: the agent's own path)")


def _approve_all(
    http: httpx.Client,
    api: kclient.ApiClient,
    org_id: str,
    who: dict[str, dict[str, str]],
    base: str,
    count: int,
) -> tuple[list[float], list[float]]:
    r = http.post(
        f"/orgs/{org_id}/conversations", json={"subject": "Products"}, headers=who["client"]
    )
    r.raise_for_status()
    cid = r.json()["id"]
    stream = ClientStream(base, f"/orgs/{org_id}/conversations/{cid}/events", who["client"])
    observer = Observer(api, "org-bench")
    time.sleep(1)  # the watch is established
    totals: list[float] = []
    floors: list[float] = []
    for _ in range(count):
        body = {
            "orgId": org_id,
            "agentRef": "agent",
            "conversationId": cid,
            "description": "bench: read the products",
            "steps": [STEP],
        }
        created = http.post("/agentic/tasks", json=body, headers=who["requester"])
        created.raise_for_status()
        task_id, name = created.json()["id"], created.json()["name"]
        stream.opened.wait(60)
        r = http.post(
            f"/agentic/tasks/{task_id}/steps/read/approve", json={}, headers=who["expert"]
        )
        approved_at = time.monotonic()
        r.raise_for_status()
        floors.append(max(0.0, observer.wait(name, "Succeeded") - approved_at))
        totals.append(max(0.0, stream.wait(name) - approved_at))
    observer.stop()
    return totals, floors


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=50)
    parser.add_argument(
        "--approvals", type=int, default=0, help="measure approval -> result for N steps instead"
    )
    args = parser.parse_args()
    if args.approvals:
        approvals(args.approvals)
    else:
        with PostgresServer() as server:
            asyncio.run(main(server, args.messages))
