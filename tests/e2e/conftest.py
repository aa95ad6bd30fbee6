"""The whole system as processes on the real control plane: the operator, the platform API
(a real HTTP server on PostgreSQL, under its own ServiceAccount) and an org's agent run
with exactly what its pod spec gives it; Shopify and Amazon are local fake servers.

`world` builds one org through the platform API the way an admin would (org, expert,
requester, tool permissions, integration credentials), provisions its AgentInstance with
the operator, and starts the agent process. `World` then drives it like its users do.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from humanwork_core import signing
from humanwork_dev.fakes.amazon import FakeAmazon
from humanwork_dev.fakes.catalog import SEED_REQUEST
from humanwork_dev.fakes.shopify import FakeShopify
from humanwork_dev.processes import AgentProcess, PlatformProcess
from tests.agents import agent_credentials, provision_agent
from tests.conftest import Cluster
from tests.fixtures.stack import PROCESS_START_SECONDS
from tests.platform.conftest import ADMIN_PASSWORD


@dataclass
class World:
    """One org on the running system, and the handles its users have."""

    http: httpx.AsyncClient
    cluster: Cluster
    platform: PlatformProcess
    namespace: str
    org_id: str
    admin: dict[str, str]
    expert: dict[str, str]
    expert2: dict[str, str]
    requester: dict[str, str]
    shop: FakeShopify
    amazon: FakeAmazon
    agent: AgentProcess
    callback_secret: str
    token: str
    workdir: Path

    async def add_user(self, prefix: str, role: str) -> tuple[str, str, dict[str, str]]:
        """A user `<prefix>-<namespace>` with `role` in the world's org, made by the admin
        and signed in: (username, password, authorization header)."""
        username = f"{prefix}-{self.namespace}"
        password = f"pw-{username}-0123456789"
        user = {"username": username, "password": password, "role": role}
        r = await self.http.post(
            f"{self.platform.url}/users",
            json={**user, "org_ids": [self.org_id]},
            headers=self.admin,
        )
        assert r.status_code == 201, r.text
        return username, password, await _login(self.http, self.platform.url, username, password)

    # --- the agent's command API (signed like the platform signs it) ---------------------

    async def ask_platform(self, request: str = SEED_REQUEST, **fields: Any) -> httpx.Response:
        """The requester asks the agent to plan through the platform (a signed command)."""
        return await self.http.post(
            f"{self.platform.url}/orgs/{self.org_id}/agents/agent/tasks",
            json={"request": request, **fields},
            headers=self.requester,
        )

    async def plan(self, request: str = SEED_REQUEST, **fields: Any) -> dict[str, Any]:
        # a fresh idempotency key unless the test names one: without it the agent names the
        # task after the signature, and two identical requests signed within one second are
        # (rightly) the same task
        fields.setdefault("idempotencyKey", f"e2e-{uuid.uuid4().hex}")
        body = json.dumps({"request": request, "requester": "requester", **fields}).encode()
        r = await self.http.post(
            f"{self.agent.url}/v1/tasks",
            content=body,
            headers={
                "Content-Type": "application/json",
                signing.SIGNATURE_HEADER: signing.sign(
                    self.callback_secret, body, datetime.now(UTC)
                ),
            },
        )
        assert r.status_code in (200, 201), r.text
        planned: dict[str, Any] = r.json()
        return planned

    # --- the platform API, as the expert uses it -----------------------------------------

    def task_id(self, name: str) -> str:
        return f"{self.namespace}/{name}"

    async def task(self, name: str) -> dict[str, Any]:
        r = await self.http.get(
            f"{self.platform.url}/agentic/tasks/{self.task_id(name)}", headers=self.expert
        )
        assert r.status_code == 200, r.text
        task: dict[str, Any] = r.json()
        return task

    async def decide(
        self, name: str, step: str, verdict: str = "approve", **body: Any
    ) -> httpx.Response:
        return await self.http.post(
            f"{self.platform.url}/agentic/tasks/{self.task_id(name)}/steps/{step}/{verdict}",
            json=body,
            headers=self.expert,
        )

    async def resume(self, name: str, step: str, **body: Any) -> httpx.Response:
        return await self.http.post(
            f"{self.platform.url}/human-tasks/{self.namespace}/{name}/{step}/resume",
            json=body,
            headers=self.expert,
        )

    async def until(self, name: str, check: Any, within: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + within
        while True:
            task = await self.task(name)
            if check(task):
                return task
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"task {name} did not get there in {within}s: {json.dumps(task)[:3000]}"
                    f"\nagent log:\n{self.agent.tail(40)}"
                )
            await _sleep(0.1)

    async def audit(self, action: str) -> list[dict[str, Any]]:
        r = await self.http.get(
            f"{self.platform.url}/audit",
            params={"action": action, "limit": 500},
            headers=self.admin,
        )
        assert r.status_code == 200, r.text
        items: list[dict[str, Any]] = r.json()["items"]
        return items


async def _sleep(seconds: float) -> None:
    import asyncio

    await asyncio.sleep(seconds)


def step_of(task: dict[str, Any], step_id: str) -> dict[str, Any]:
    """The status entry of a step (empty when it has none yet)."""
    for entry in (task.get("status") or {}).get("steps") or []:
        if entry["id"] == step_id:
            return dict(entry)
    return {}


def execution_state(task: dict[str, Any], step_id: str) -> str | None:
    return (step_of(task, step_id).get("execution") or {}).get("state")


async def _login(http: httpx.AsyncClient, base: str, user: str, password: str) -> dict[str, str]:
    r = await http.post(f"{base}/auth/token", json={"username": user, "password": password})
    assert r.status_code == 200, r.text
    return {"Authorization": f"Bearer {r.json()['access_token']}"}


async def _users(
    http: httpx.AsyncClient, base: str, admin: dict[str, str], slug: str, org_id: str
) -> dict[str, dict[str, str]]:
    """The org's expert (role operator), second expert and requester, logged in."""
    users: dict[str, dict[str, str]] = {}
    for name, role in (("expert", "operator"), ("expert2", "expert"), ("req", "operator")):
        username, password = f"{name}-{slug}", f"pw-{name}-{slug}-0123456789"
        r = await http.post(
            f"{base}/users",
            json={
                "username": username,
                "password": password,
                "role": role,
                "org_ids": [org_id],
            },
            headers=admin,
        )
        assert r.status_code == 201, r.text
        users[name] = await _login(http, base, username, password)
    return users


async def _integrations(
    http: httpx.AsyncClient,
    base: str,
    admin: dict[str, str],
    org_id: str,
    shop: FakeShopify,
    amazon: FakeAmazon,
) -> None:
    for tool, creds in (("shopify", shop.credentials()), ("amazon", amazon.credentials())):
        r = await http.put(
            f"{base}/orgs/{org_id}/tool-permissions/{tool}",
            json={"enabled": True},
            headers=admin,
        )
        assert r.status_code == 200, r.text
        r = await http.put(
            f"{base}/orgs/{org_id}/integrations/{tool}",
            json={"credentials": creds},
            headers=admin,
        )
        assert r.status_code in (200, 201), r.text


@pytest.fixture
async def world(
    cluster: Cluster,
    platform_server: PlatformProcess,
    tmp_path: Path,
) -> AsyncIterator[World]:
    async with open_world(cluster, platform_server, tmp_path) as made:
        yield made


@asynccontextmanager
async def open_world(
    cluster: Cluster,
    platform_server: PlatformProcess,
    tmp_path: Path,
    agent_env: dict[str, str] | None = None,
) -> AsyncIterator[World]:
    """One org on `platform_server` and its agent process (what `world` gives; a test that
    brings a platform of its own, on another database, opens one with this). `agent_env`:
    variables added to what the agent's pod spec gives it (as an operator setting would)."""
    base = platform_server.url
    async with httpx.AsyncClient(timeout=60) as http:
        admin = await _login(http, base, "admin", ADMIN_PASSWORD)
        slug = f"e2e-{uuid.uuid4().hex[:6]}"
        r = await http.post(f"{base}/orgs", json={"slug": slug, "name": "Acme"}, headers=admin)
        assert r.status_code == 201, r.text
        org_id, namespace = r.json()["id"], f"org-{slug}"
        # the operator provisions the agent while the admin sets the org up: neither needs
        # the other, and the agent process starts once both are done
        provisioned = asyncio.ensure_future(
            asyncio.to_thread(provision_agent, cluster, namespace, org_id)
        )
        try:
            users = await _users(http, base, admin, slug, org_id)
        finally:
            await asyncio.wait([provisioned])
        provisioned.result()
        with FakeShopify() as shop, FakeAmazon() as amazon:
            await _integrations(http, base, admin, org_id, shop, amazon)
            token, callback_secret = agent_credentials(cluster, namespace)
            agent = AgentProcess(cluster.kubeconfig, namespace, "agent", tmp_path / "agent", base)
            agent.spec.env.update(agent_env or {})
            try:
                agent.start(timeout=PROCESS_START_SECONDS)
                # tell the platform where this agent listens (its Service does not exist here)
                endpoints = platform_server.workdir / "agent-endpoints.json"
                known = json.loads(endpoints.read_text())
                endpoints.write_text(json.dumps({**known, f"{namespace}/agent": agent.url}))
                yield World(
                    http=http,
                    cluster=cluster,
                    platform=platform_server,
                    namespace=namespace,
                    org_id=org_id,
                    admin=admin,
                    expert=users["expert"],
                    expert2=users["expert2"],
                    requester=users["req"],
                    shop=shop,
                    amazon=amazon,
                    agent=agent,
                    callback_secret=callback_secret,
                    token=token,
                    workdir=tmp_path,
                )
            finally:
                agent.stop()  # also when it never answered its health check (it leaked)
                print(agent.tail(60))
