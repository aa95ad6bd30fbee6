"""The samples work as shipped (issue 15, item 6).

`kubectl apply -k manifests/samples/` UNCHANGED on the real control plane (the org
namespace, its AgentInstance and the seed's example task, as a GitOps tool would apply
them), then the platform adopts that namespace (`POST /orgs` with the id its
`humanwork.io/org-id` label carries), an admin enables the org's tools with credentials
of the local fake upstreams, the operator provisions the agent, the agent runs as a
process with exactly what its pod is given, and an expert approves the sample task's two
steps: each executes through the platform's tool proxy against the fakes, in order.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from kubernetes import client

from humanwork_dev.fakes import catalog
from humanwork_dev.fakes.amazon import FakeAmazon
from humanwork_dev.fakes.shopify import FakeShopify
from humanwork_dev.processes import AgentProcess, PlatformProcess
from tests.agents import LLM_KEY, wait_phase
from tests.conftest import Cluster
from tests.e2e.conftest import _login, execution_state
from tests.platform.conftest import ADMIN_PASSWORD

SAMPLES = Path(__file__).resolve().parents[2] / "manifests" / "samples"


def _sample(kind: str) -> dict[str, Any]:
    for path in SAMPLES.glob("*.yaml"):
        doc = yaml.safe_load(path.read_text())
        if doc.get("kind") == kind:
            return dict(doc)
    raise AssertionError(f"no {kind} in {SAMPLES}")


def _gone(core: client.CoreV1Api, namespace: str, within: float = 120) -> None:
    deadline = time.monotonic() + within
    try:
        core.delete_namespace(namespace)
    except client.ApiException as exc:
        if exc.status != 404:
            raise
    while time.monotonic() < deadline:
        try:
            core.read_namespace(namespace)
        except client.ApiException as exc:
            if exc.status == 404:
                return
            raise
        time.sleep(0.5)
    raise AssertionError(f"namespace {namespace} was not deleted in {within}s")


@pytest.fixture
def samples_applied(cluster: Cluster, platform_server: PlatformProcess) -> Iterator[str]:
    """The samples applied unchanged (after any earlier run's namespace is gone)."""
    namespace = _sample("Namespace")["metadata"]["name"]
    core = client.CoreV1Api(cluster.api)
    _gone(core, namespace)
    cluster.kubectl("apply", "-k", str(SAMPLES))
    try:
        yield namespace
    finally:
        _gone(core, namespace)


async def _admin_sets_up_the_org(
    http: httpx.AsyncClient, base: str, shop: FakeShopify, amazon: FakeAmazon
) -> tuple[dict[str, str], dict[str, str]]:
    """The platform adopts the GitOps namespace; the org's tools and an expert; answers
    (admin, expert) headers."""
    admin = await _login(http, base, "admin", ADMIN_PASSWORD)
    namespace = _sample("Namespace")
    org_id = namespace["metadata"]["labels"]["humanwork.io/org-id"]
    slug = namespace["metadata"]["name"].removeprefix("org-")
    # a namespace labelled for ANOTHER org is refused, and nothing is created
    r = await http.post(
        f"{base}/orgs",
        json={"slug": slug, "name": "Acme", "id": "00000000-0000-4000-8000-000000000001"},
        headers=admin,
    )
    assert r.status_code == 409 and r.json()["code"] == "conflict", r.text
    r = await http.post(
        f"{base}/orgs", json={"slug": slug, "name": "Acme", "id": org_id}, headers=admin
    )
    assert r.status_code == 201, r.text
    assert (r.json()["id"], r.json()["namespace"]) == (org_id, namespace["metadata"]["name"])
    admin = await _login(http, base, "admin", ADMIN_PASSWORD)  # now a member of the org
    for tool, creds in (("shopify", shop.credentials()), ("amazon", amazon.credentials())):
        r = await http.put(
            f"{base}/orgs/{org_id}/tool-permissions/{tool}", json={"enabled": True}, headers=admin
        )
        assert r.status_code == 200, r.text
        r = await http.put(
            f"{base}/orgs/{org_id}/integrations/{tool}",
            json={"credentials": creds},
            headers=admin,
        )
        assert r.status_code in (200, 201), r.text
    password = "pw-sample-expert-0123456789"
    r = await http.post(
        f"{base}/users",
        json={
            "username": "sample-expert",
            "password": password,
            "role": "expert",
            "org_ids": [org_id],
        },
        headers=admin,
    )
    assert r.status_code == 201, r.text
    return admin, await _login(http, base, "sample-expert", password)


async def _until(
    http: httpx.AsyncClient, url: str, headers: dict[str, str], check: Any, agent: AgentProcess
) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        r = await http.get(url, headers=headers)
        assert r.status_code == 200, r.text
        task: dict[str, Any] = r.json()
        if check(task):
            return task
        if time.monotonic() > deadline:
            raise AssertionError(f"{task}\nagent log:\n{agent.tail(60)}")
        await asyncio.sleep(0.2)


async def test_the_samples_as_shipped_run_through_approval_and_execution(
    cluster: Cluster, platform_server: PlatformProcess, samples_applied: str, tmp_path: Path
) -> None:
    namespace = samples_applied
    instance, task_doc = _sample("AgentInstance"), _sample("AgenticTask")
    secret = instance["spec"]["llm"]["apiKeySecretRef"]
    # the one thing the sample asks its user to create: the LLM key Secret
    client.CoreV1Api(cluster.api).create_namespaced_secret(
        namespace,
        client.V1Secret(
            metadata=client.V1ObjectMeta(name=secret["name"]),
            string_data={secret["key"]: LLM_KEY},
        ),
    )
    agent_name, task_name = instance["metadata"]["name"], task_doc["metadata"]["name"]
    wait_phase(cluster, namespace, "Ready", name=agent_name)
    base = platform_server.url
    read, write = (s["id"] for s in task_doc["spec"]["steps"])
    async with httpx.AsyncClient(timeout=60) as http:
        with FakeShopify() as shop, FakeAmazon() as amazon:
            _, expert = await _admin_sets_up_the_org(http, base, shop, amazon)
            agent = AgentProcess(cluster.kubeconfig, namespace, agent_name, tmp_path, base)
            agent.start()
            try:
                url = f"{base}/agentic/tasks/{namespace}/{task_name}"
                r = await http.post(f"{url}/steps/{read}/approve", json={}, headers=expert)
                assert r.status_code == 200, r.text
                task = await _until(
                    http, url, expert, lambda t: execution_state(t, read) == "Succeeded", agent
                )
                assert execution_state(task, write) is None and shop.side_effects == []
                assert amazon.requests_to("/orders/v0/orders")
                r = await http.post(f"{url}/steps/{write}/approve", json={}, headers=expert)
                assert r.status_code == 200, r.text
                task = await _until(
                    http, url, expert, lambda t: t["status"].get("phase") == "Completed", agent
                )
            finally:
                agent.stop()
            assert execution_state(task, write) == "Succeeded"
            assert len(shop.side_effects) == 1
            assert shop.levels() == catalog.expected_inventory_after_reconcile()
