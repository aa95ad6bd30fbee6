"""Fixtures of the platform API tests that need BOTH a real control plane and PostgreSQL.

They reuse the PostgreSQL fixtures of tests/platform and the cluster fixtures of
tests/conftest.py and tests/integration (CRDs, admission policies, operator and platform
RBAC installed as users install them; the operator running as a process). The platform
talks to the cluster with a kubeconfig of the `humanwork-platform-api` ServiceAccount, so
its RBAC and the admission policies are exercised for real.

Each test that writes gets a platform, a database and orgs of its own (`app`, `orgs`).
Tests that only read share one per module (`shared`: the same stack served on loopback,
`reader`: a client of it), which saves the database, the platform's start and the orgs'
namespaces and users per test.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from fastapi import FastAPI
from kubernetes import client as kclient

from humanwork_core.tokens import generate_signing_key, jwks
from humanwork_dev.cluster import token_kubeconfig
from humanwork_dev.postgres import PostgresServer
from humanwork_dev.processes import PLATFORM_NS, OperatorProcess
from platform_api.app import create_app
from platform_api.auth import passwords
from platform_api.settings import Settings
from tests.conftest import Cluster
from tests.fixtures.database import TEMPLATE
from tests.fuzz.serve import served
from tests.platform.conftest import (
    Api,
    Caller,
    StaticResolver,
    database_url,
    db,
    make_settings,
)

__all__ = ["database_url", "db"]

PLATFORM_ACCOUNT = "humanwork-platform-api"
T = TypeVar("T")


@pytest.fixture(scope="session")
def platform_kubeconfig(
    cluster: Cluster, installed: None, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """A kubeconfig that authenticates as the platform API's ServiceAccount."""
    return token_kubeconfig(
        cluster.kubeconfig,
        cluster.kubectl_path,
        PLATFORM_NS,
        PLATFORM_ACCOUNT,
        tmp_path_factory.mktemp("platform") / "kubeconfig",
    )


RECEIPT_KEY = generate_signing_key()
"""The key the tests' platform signs receipts with."""
RETIRED_RECEIPT_KEY = generate_signing_key()
"""A retired receipt key the tests' platform still publishes."""


def receipt_settings(directory: Path) -> dict[str, Any]:
    """The settings of the receipt keys, their files written to `directory`."""
    key_file, retired_file = directory / "receipt-key.pem", directory / "receipt-retired.json"
    key_file.write_bytes(RECEIPT_KEY.to_pem())
    retired_file.write_text(json.dumps(jwks([RETIRED_RECEIPT_KEY])))
    return {"receipt_key_file": key_file, "receipt_verify_keys_file": retired_file}


@pytest.fixture
def settings(database_url: str, platform_kubeconfig: Path, tmp_path: Path) -> Settings:
    # the fake upstreams listen on loopback (HUMANWORK_UPSTREAM_ALLOWED_ENDPOINTS)
    return make_settings(
        database_url,
        kubeconfig=str(platform_kubeconfig),
        upstream_allowed_endpoints=["127.0.0.1/32"],
        **receipt_settings(tmp_path),
    )


@pytest.fixture
def endpoints_file(tmp_path: Path) -> Path:
    """Where the tests' agent processes register their URLs (`agent_endpoints_file`)."""
    path = tmp_path / "agent-endpoints.json"
    path.write_text("{}")
    return path


@pytest.fixture
def org_namespaces(cluster: Cluster) -> Iterator[list[str]]:
    """Namespaces of the orgs a test creates; deleted (as the cluster admin) afterwards."""
    created: list[str] = []
    yield created
    _delete_namespaces(cluster, created)


def _delete_namespaces(cluster: Cluster, names: list[str]) -> None:
    core = kclient.CoreV1Api(cluster.api)
    for name in names:
        try:
            core.delete_namespace(name)
        except kclient.ApiException as exc:
            if exc.status != 404:
                raise


@pytest.fixture
def resolver() -> StaticResolver:
    """The platform's resolver: names from the test, never from the real network."""
    return StaticResolver()


@pytest.fixture
async def app(
    settings: Settings,
    operator: OperatorProcess,
    org_namespaces: list[str],
    resolver: StaticResolver,
) -> AsyncIterator[FastAPI]:
    """The platform API wired to the cluster (the Kubernetes `OrgNamespaces` included),
    with the operator running so that tasks get their deadlines and phases."""
    application = create_app(settings, resolver=resolver)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://platform", timeout=60) as c:
        yield c


@pytest.fixture
def api(client: httpx.AsyncClient) -> Api:
    return Api(client)


PLAN: dict[str, Any] = {
    "agentRef": "shop",
    "description": "Reconcile all Amazon orders for October and update Shopify",
    "steps": [
        {
            "id": "read",
            "description": "Fetch October orders",
            "kind": "action",
            "tool": "amazon_query",
            "parameters": {"month": "2026-10"},
            "risk": "high",
        },
        {
            "id": "write",
            "description": "Update inventory of 14 SKUs",
            "kind": "action",
            "tool": "shopify_query",
            "parameters": {"skus": 14},
            "risk": "critical",
        },
    ],
}


@dataclass
class Orgs:
    """Org A (its namespace, a requester with run.control, two experts, a viewer, an
    admin) and org B (with its own expert and admin)."""

    org_a: str
    ns_a: str
    org_b: str
    ns_b: str
    requester: Caller
    expert: Caller
    expert2: Caller
    viewer: Caller
    admin_a: Caller
    expert_b: Caller
    admin_b: Caller


class TaskApi:
    """Drives `/agentic/tasks` the way a client would."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def create(self, caller: Caller, org_id: str, **overrides: Any) -> dict[str, Any]:
        body = {**PLAN, "orgId": org_id, "conversationId": str(uuid.uuid4()), **overrides}
        r = await self.client.post("/agentic/tasks", json=body, headers=caller.headers)
        assert r.status_code == 201, r.text
        task: dict[str, Any] = r.json()
        return task

    async def get(self, caller: Caller, task_id: str) -> httpx.Response:
        return await self.client.get(f"/agentic/tasks/{task_id}", headers=caller.headers)

    async def decide(
        self,
        caller: Caller,
        task_id: str,
        step: str,
        verdict: str = "approve",
        body: dict[str, Any] | None = None,
        key: str | None = None,
    ) -> httpx.Response:
        headers = dict(caller.headers)
        if key is not None:
            headers["Idempotency-Key"] = key
        return await self.client.post(
            f"/agentic/tasks/{task_id}/steps/{step}/{verdict}",
            json=body if body is not None else {},
            headers=headers,
        )

    async def until(
        self,
        caller: Caller,
        task_id: str,
        check: Callable[[dict[str, Any]], bool],
        within: float = 30,
    ) -> dict[str, Any]:
        """Poll the task until `check` holds; fail with the last state otherwise."""
        return await until(lambda: self._read(caller, task_id), check, within)

    async def _read(self, caller: Caller, task_id: str) -> dict[str, Any]:
        r = await self.get(caller, task_id)
        assert r.status_code == 200, r.text
        task: dict[str, Any] = r.json()
        return task


def ticked(task: dict[str, Any]) -> bool:
    """The operator has given the decidable step its deadline (a task read through the
    API): the task is set up, and its step's status entry is there."""
    return bool(task["status"].get("nextDeadline"))


async def until(
    read: Callable[[], Awaitable[T]], check: Callable[[T], bool], within: float = 30
) -> T:
    deadline = time.monotonic() + within
    while True:
        value = await read()
        if check(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {within}s; last: {value}")
        await asyncio.sleep(0.2)


@dataclass
class Shared:
    """A platform served on loopback for a module's reading tests, its orgs and the
    resolver it looks names up with."""

    base: str
    orgs: Orgs
    resolver: StaticResolver


@pytest.fixture(scope="module")
def shared(
    postgres: PostgresServer, platform_kubeconfig: Path, operator: OperatorProcess, cluster: Cluster
) -> Iterator[Shared]:
    """The stack of `app` and `orgs`, once per module, for tests that only read: uvicorn in
    a thread of its own (its own event loop, so that any test's loop may call it)."""
    name = f"t_{uuid.uuid4().hex}"
    namespaces: list[str] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(passwords, "N", 2**12)  # as `database_url`
        url = asyncio.run(postgres.create_database(name, template=TEMPLATE))
        settings = make_settings(
            url, kubeconfig=str(platform_kubeconfig), upstream_allowed_endpoints=["127.0.0.1/32"]
        )
        resolver = StaticResolver()
        try:
            with served(create_app(settings, resolver=resolver)) as base:
                yield Shared(base, asyncio.run(_shared_orgs(base, namespaces)), resolver)
        finally:
            _delete_namespaces(cluster, namespaces)
            asyncio.run(postgres.drop_database(name))


async def _shared_orgs(base: str, namespaces: list[str]) -> Orgs:
    async with httpx.AsyncClient(base_url=base, timeout=60) as c:
        return await make_orgs(Api(c), namespaces)


@pytest.fixture
async def reader(shared: Shared) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the module's shared platform (`shared`), for a test that only reads."""
    async with httpx.AsyncClient(base_url=shared.base, timeout=60) as c:
        yield c


@pytest.fixture
def tasks(client: httpx.AsyncClient) -> TaskApi:
    return TaskApi(client)


@pytest.fixture
async def orgs(api: Api, org_namespaces: list[str]) -> Orgs:
    return await make_orgs(api, org_namespaces)


async def make_orgs(api: Api, org_namespaces: list[str]) -> Orgs:
    """Two new orgs and their users (see `Orgs`); their namespaces go to `org_namespaces`."""
    root = await api.admin()
    suffix = uuid.uuid4().hex[:6]
    org_a = await api.org(root, f"a-{suffix}")
    org_b = await api.org(root, f"b-{suffix}")
    org_namespaces.extend([f"org-a-{suffix}", f"org-b-{suffix}"])
    return Orgs(
        org_a=org_a,
        ns_a=f"org-a-{suffix}",
        org_b=org_b,
        ns_b=f"org-b-{suffix}",
        requester=await api.user(root, f"requester-{suffix}", "operator", [org_a]),
        expert=await api.user(root, f"expert-{suffix}", "expert", [org_a]),
        expert2=await api.user(root, f"expert2-{suffix}", "expert", [org_a]),
        viewer=await api.user(root, f"viewer-{suffix}", "viewer", [org_a]),
        admin_a=await api.user(root, f"admin-a-{suffix}", "admin", [org_a]),
        expert_b=await api.user(root, f"expert-b-{suffix}", "expert", [org_b]),
        admin_b=await api.user(root, f"admin-b-{suffix}", "admin", [org_b]),
    )
