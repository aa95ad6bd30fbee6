"""The fault suite's world: the process-mode stack of the end-to-end tests with work in
flight, one for the whole suite (built once: a platform's start, its users' password
hashes and the agent's provisioning are most of what a world costs), on the session's
control plane, operator and PostgreSQL.

`FaultWorld` is one org on a platform process of its own (its own database on the
session's PostgreSQL, so killing it disturbs no other part of the session), an agent
process, the fake Amazon, and the fake Shopify behind a `FaultProxy` (the org's Shopify
integration names the proxy). Each test gets it through `fresh`: whatever an earlier test
killed is running again, nothing of its work still moves, and the world's view (its
tasks, the approvals answered, the upstream's ledger) starts empty, so the invariant
checker judges what this test made and nothing else. Three experts approve concurrently
(`approve_all`), each approval with an Idempotency-Key it retries with until it is
answered; `check` waits until the world settles, prints the time to recover and fails on
every broken invariant (`tests.faults.invariants`).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from humanwork_dev.fakes import catalog
from humanwork_dev.fakes.amazon import FakeAmazon
from humanwork_dev.fakes.shopify import FakeShopify
from humanwork_dev.faultproxy import FaultProxy
from humanwork_dev.postgres import PostgresServer
from humanwork_dev.processes import AgentProcess, OperatorProcess, PlatformProcess
from tests.agents import provision_agent
from tests.conftest import Cluster
from tests.faults.invariants import Answered, Observed, violations
from tests.platform.conftest import ADMIN_PASSWORD, CREDENTIALS_KEY, JWT_SECRET

MUG = catalog.BY_SKU[catalog.DISCREPANT_SKU].inventory_item_id
WRITE = {
    "action": "adjustInventoryLevel",
    "params": {
        "location_id": catalog.WAREHOUSE_LOCATION_ID,
        "inventory_item_id": MUG,
        "available_adjustment": -1,
    },
}
UPSTREAM_TIMEOUT = 3.0
"""The platform's upstream timeout in the fault world (10 s by default)."""
CLAIM_LEASE = 5 * UPSTREAM_TIMEOUT
"""The lease of a tool call's claim (300 s by default): a call killed with its platform is
an unknown outcome in the queue this long after, within the time the world has to settle."""
SETTLE_WITHIN = 120.0
STARTUP = 240.0
"""How long a platform may take to start (migrations, scrypt) on a loaded 2-core machine."""


@dataclass
class FaultWorld:
    """One org on the running system with its users, its fakes and its fault proxy."""

    cluster: Cluster
    platform: PlatformProcess
    database_url: str
    namespace: str
    org_id: str
    admin: dict[str, str]
    experts: list[dict[str, str]]
    requester: dict[str, str]
    shop: FakeShopify
    proxy: FaultProxy
    amazon: FakeAmazon
    agent: AgentProcess
    checkpoints: dict[str, str]
    tasks: list[str] = field(default_factory=list)
    answered: list[Answered] = field(default_factory=list)
    ledger_from: int = 0
    """Where this test's part of the upstream's ledger starts (`fresh` sets it)."""
    replicas: list[str] = field(default_factory=list)
    """The platform URLs the experts' clients spread their requests over (a load balancer's
    view: a refused or failed request goes to the next); the platform's alone when empty."""

    @property
    def url(self) -> str:
        return self.platform.url

    def call(self, method: str, path: str, headers: dict[str, str], **kw: Any) -> httpx.Response:
        return httpx.request(method, f"{self.url}{path}", headers=headers, timeout=60, **kw)

    # ------------------------------------------------------------------ work in flight

    def create_tasks(self, count: int) -> list[str]:
        """`count` one-step write tasks (high risk) of the world's agent; their names."""
        names = []
        for n in range(count):
            body = {
                "orgId": self.org_id,
                "agentRef": "agent",
                "conversationId": str(uuid.uuid4()),
                "description": f"Lower HW-MUG-001 at the warehouse by 1 ({n})",
                "steps": [
                    {
                        "id": "fix",
                        "description": "Lower HW-MUG-001 at the warehouse by 1",
                        "kind": "action",
                        "tool": "shopify",
                        "parameters": WRITE,
                        "risk": "high",
                    }
                ],
            }
            r = self.call("POST", "/agentic/tasks", self.requester, json=body)
            assert r.status_code == 201, r.text
            names.append(r.json()["id"].split("/")[1])
        self.tasks.extend(names)
        return names

    def approve(self, name: str, expert: dict[str, str], key: str, attempt: int = 0) -> bool:
        """One approval attempt (to the replica `attempt` picks); True (and recorded as
        answered) when answered 2xx."""
        bases = self.replicas or [self.url]
        base = bases[(hash(name) + attempt) % len(bases)]
        path = f"{base}/agentic/tasks/{self.namespace}/{name}/steps/fix/approve"
        try:
            r = httpx.post(path, headers={**expert, "Idempotency-Key": key}, json={}, timeout=60)
        except httpx.HTTPError:
            return False
        if 200 <= r.status_code < 300:
            self.answered.append(Answered(name, "fix", key))
            return True
        assert r.status_code >= 500 or r.status_code == 409, r.text
        return r.status_code == 409 and r.json().get("code") != "run_state_conflict"

    def approve_all(self, names: list[str], until: Callable[[], bool] | None = None) -> None:
        """The experts approve `names` concurrently (task n by expert n mod 3), each retrying
        with its key until answered; stops retrying early when `until()` says so."""

        def one(n: int, name: str) -> None:
            key, attempt = f"approve-{name}", 0
            deadline = time.monotonic() + STARTUP + SETTLE_WITHIN  # a platform restarting
            while not self.approve(name, self.experts[n % len(self.experts)], key, attempt):
                if (until and until()) or time.monotonic() > deadline:
                    return
                attempt += 1
                time.sleep(0.2)

        with ThreadPoolExecutor(len(self.experts)) as pool:
            list(pool.map(one, range(len(names)), names))

    def approvals_in_flight(self, names: list[str], answered: int = 0) -> threading.Thread:
        """The experts approving `names` in a thread of their own, once `answered` of them
        have been answered (some answered, the rest in flight)."""
        before = len(self.answered)
        experts = threading.Thread(target=self.approve_all, args=(names,))
        experts.start()
        deadline = time.monotonic() + 90
        while len(self.answered) < before + answered:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        return experts

    def restart_platform(self, env: dict[str, str] | None = None) -> None:
        """Start the platform again on its port (the agent keeps its URL)."""
        self.platform.kill()
        self.platform.start(STARTUP, port=self.platform.port, env=env)

    # ------------------------------------------------------------------ reading it

    def task(self, name: str) -> dict[str, Any]:
        r = self.call("GET", f"/agentic/tasks/{self.namespace}/{name}", self.admin)
        assert r.status_code == 200, r.text
        task: dict[str, Any] = r.json()
        return task

    def queue(self) -> list[str]:
        r = self.call("GET", "/human-tasks", self.experts[0], params={"limit": 200})
        assert r.status_code == 200, r.text
        return [item["id"] for item in r.json()["items"]]

    def audited_keys(self) -> list[str]:
        r = self.call(
            "GET", "/audit", self.admin, params={"action": "task.step.approve", "limit": 500}
        )
        assert r.status_code == 200, r.text
        return [row["details"].get("idempotency_key", "") for row in r.json()["items"]]

    def audit_problems(self) -> list[str]:
        """Problems `audit-checkpoint` finds (it verifies the chains against the signed
        checkpoints, then signs the intact heads)."""
        done = subprocess.run(
            [sys.executable, "-m", "platform_api.audit", "checkpoint"],
            env={**os.environ, **self.platform.env, **self.checkpoints},
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        if done.returncode == 0:
            return []
        return [line for line in done.stderr.splitlines() if line] or [done.stdout]

    def observed(self) -> Observed:
        return Observed(
            tasks={name: self.task(name) for name in self.tasks},
            answered=list(self.answered),
            ledger=[
                (s.action, s.idempotency_key) for s in self.shop.side_effects[self.ledger_from :]
            ],
            queue=self.queue(),
            namespace=self.namespace,
            audited_keys=self.audited_keys(),
        )

    def settled(self) -> bool:
        """Nothing moves by itself any more: every task terminal or waiting in the queue."""
        return not [
            v for v in violations(self.observed()) if "nobody can act on it" in v or "is lost" in v
        ]

    def check(self, fault_at: float, what: str) -> None:
        """Wait until the world settles (or time runs out), print the time to recover, and
        fail with every broken invariant."""
        deadline = time.monotonic() + SETTLE_WITHIN
        while not self.settled() and time.monotonic() < deadline:
            time.sleep(0.25)
        recovered = time.monotonic() - fault_at
        print(f"\n[faults] {what}: recovered in {recovered:.1f} s")
        seen = self.observed()
        seen.audit_problems = self.audit_problems()
        broken = violations(seen)
        assert not broken, "\n".join(broken) + f"\nagent log:\n{self.agent.tail(30)}"


def _login(base: str, user: str, password: str) -> dict[str, str]:
    r = httpx.post(f"{base}/auth/token", json={"username": user, "password": password}, timeout=30)
    assert r.status_code == 200, r.text
    return {"Authorization": f"Bearer {r.json()['access_token']}"}


def _checkpoint_settings(workdir: Path) -> dict[str, str]:
    key = workdir / "checkpoint-key.pem"
    key.write_bytes(
        Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return {
        "HUMANWORK_AUDIT_CHECKPOINT_DIR": str(workdir / "checkpoints"),
        "HUMANWORK_AUDIT_CHECKPOINT_KEY_FILE": str(key),
    }


def _platform(
    cluster: Cluster, postgres: PostgresServer, workdir: Path
) -> tuple[PlatformProcess, str]:
    name = f"faults_{uuid.uuid4().hex[:10]}"
    url = asyncio.run(postgres.create_database(name))
    # the session's server trades durability for speed (synchronous_commit off): a crash
    # would lose the last commits, a tool call's claim among them, which production's
    # never does; this world's database commits as production does
    asyncio.run(postgres._execute("postgres", f"ALTER DATABASE {name} SET synchronous_commit = on"))
    workdir.mkdir(parents=True, exist_ok=True)
    endpoints = workdir / "agent-endpoints.json"
    endpoints.write_text("{}")
    server = PlatformProcess(
        cluster.kubeconfig,
        cluster.kubectl_path,
        workdir,
        env={
            "HUMANWORK_DATABASE_URL": url,
            "HUMANWORK_ADMIN_PASSWORD": ADMIN_PASSWORD,
            "HUMANWORK_JWT_SECRET": JWT_SECRET,
            "HUMANWORK_CREDENTIALS_KEYS": json.dumps({"k1": CREDENTIALS_KEY}),
            "HUMANWORK_CREDENTIALS_ACTIVE_KEY": "k1",
            "HUMANWORK_AGENT_ENDPOINTS_FILE": str(endpoints),
            "HUMANWORK_UPSTREAM_ALLOWED_ENDPOINTS": json.dumps(["127.0.0.1/32"]),
            "HUMANWORK_UPSTREAM_TIMEOUT_SECONDS": str(UPSTREAM_TIMEOUT),
            "HUMANWORK_TOOL_CLAIM_LEASE_SECONDS": str(CLAIM_LEASE),
        },
    )
    server.start(timeout=STARTUP)
    return server, url


def _users(base: str, admin: dict[str, str], org_id: str, slug: str) -> list[dict[str, str]]:
    """The requester, then three experts (one an operator), each signed in."""
    headers = []
    for name, role in (("req", "operator"), ("e1", "operator"), ("e2", "expert"), ("e3", "expert")):
        username, password = f"{name}-{slug}", f"pw-{name}-{slug}-0123456789"
        r = httpx.post(
            f"{base}/users",
            json={"username": username, "password": password, "role": role, "org_ids": [org_id]},
            headers=admin,
            timeout=30,
        )
        assert r.status_code == 201, r.text
        headers.append(_login(base, username, password))
    return headers


@pytest.fixture(scope="session")
def fault_world(
    cluster: Cluster,
    installed: None,
    operator: OperatorProcess,
    postgres: PostgresServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[FaultWorld]:
    workdir = tmp_path_factory.mktemp("faults")
    platform, database_url = _platform(cluster, postgres, workdir / "platform")
    base = platform.url
    admin = _login(base, "admin", ADMIN_PASSWORD)
    slug = f"flt-{uuid.uuid4().hex[:6]}"
    r = httpx.post(f"{base}/orgs", json={"slug": slug, "name": "Faults"}, headers=admin)
    assert r.status_code == 201, r.text
    org_id, namespace = r.json()["id"], f"org-{slug}"
    requester, *experts = _users(base, admin, org_id, slug)
    with FakeShopify() as shop, FakeAmazon() as amazon, FaultProxy(shop.url) as proxy:
        for tool, creds in (
            ("shopify", shop.credentials(baseUrl=proxy.url)),
            ("amazon", amazon.credentials()),
        ):
            r = httpx.put(
                f"{base}/orgs/{org_id}/tool-permissions/{tool}",
                json={"enabled": True},
                headers=admin,
            )
            assert r.status_code == 200, r.text
            r = httpx.put(
                f"{base}/orgs/{org_id}/integrations/{tool}",
                json={"credentials": creds},
                headers=admin,
            )
            assert r.status_code in (200, 201), r.text
        provision_agent(cluster, namespace, org_id)
        agent = AgentProcess(cluster.kubeconfig, namespace, "agent", workdir / "agent", base)
        agent.start()
        endpoints = platform.workdir / "agent-endpoints.json"
        endpoints.write_text(json.dumps({f"{namespace}/agent": agent.url}))
        world = FaultWorld(
            cluster=cluster,
            platform=platform,
            database_url=database_url,
            namespace=namespace,
            org_id=org_id,
            admin=admin,
            experts=experts,
            requester=requester,
            shop=shop,
            proxy=proxy,
            amazon=amazon,
            agent=agent,
            checkpoints=_checkpoint_settings(workdir),
        )
        assert world.audit_problems() == []  # the first checkpoints, before any fault
        try:
            yield world
        finally:
            agent.stop()
            platform.stop()
            print(agent.tail(40), platform.tail(40), sep="\n")


@pytest.fixture
def fresh(fault_world: FaultWorld) -> Iterator[FaultWorld]:
    """The suite's world with no rule left in its proxy, its platform and agent running,
    nothing of an earlier test still moving (its writes would meet this test's rules), and
    its view scoped to this test: no task, no answered approval, the ledger from here on."""
    world = fault_world
    world.proxy.clear()
    if world.platform.proc is None or world.platform.proc.poll() is not None:
        world.restart_platform()
    if world.agent.proc is None or world.agent.proc.poll() is not None:
        world.agent.start()
    deadline = time.monotonic() + SETTLE_WITHIN
    while not world.settled() and time.monotonic() < deadline:
        time.sleep(0.25)
    world.tasks, world.answered = [], []
    world.ledger_from = len(world.shop.side_effects)
    yield world
    world.proxy.clear()
