"""The router on the real control plane and PostgreSQL (issue 15, item 5): a request that
names no agent goes to the org's agent whose specialist fits, by keywords first, then by
an LLM (a local OpenAI-compatible server); the choice and why are on the task (annotations
only the platform API may write, proven with an agent's own identity) and in the audit row;
refusals have stable codes.

The two agents are real AgentInstances the operator provisions; their processes are local
HTTP servers that plan as the agent does: each creates the task with its own
ServiceAccount's token (so admission applies) carrying the platform's plan request id.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client as kclient
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from humanwork_dev.fakes.openai_server import FakeOpenAI
from humanwork_dev.fakes.server import BackgroundServer
from platform_api.settings import Settings
from tests.agents import LLM_KEY, create_instance, wait_phase
from tests.conftest import Cluster
from tests.integration.test_tasks import task_manifest
from tests.platform.conftest import Api, make_settings
from tests.platform_k8s.conftest import Orgs
from tests.support import eventually, service_account_token

ROUTED_BY, REASON = "humanwork.io/routed-by", "humanwork.io/routing-reason"
SPECIALISTS = {
    "shop": {
        "name": "Bob",
        "systemPrompt": "You run e-commerce operations.",
        "description": "Shopify and Amazon stores: orders, inventory, listings",
        "keywords": ["shopify", "amazon", "inventory", "listing"],
    },
    "books": {
        "name": "Fin",
        "systemPrompt": "You keep the books.",
        "description": "Bookkeeping: invoices, bills, purchase orders",
        "keywords": ["invoice", "quickbooks", "purchase order", "xero"],
    },
}


class SpecialistAgent:
    """An agent process that plans as the real one does: on a plan command it creates the
    task as its own ServiceAccount, with the platform's plan request id."""

    def __init__(self, cluster: Cluster, namespace: str, org_id: str, name: str) -> None:
        token = eventually(
            lambda: service_account_token(cluster.api, namespace, f"{name}-agent"), timeout=30
        )
        self.api = cluster.client_for_token(token)
        self.namespace, self.org_id, self.name = namespace, org_id, name
        self.commands: list[dict[str, Any]] = []
        self.server = BackgroundServer(
            Starlette(routes=[Route("/v1/tasks", self.plan, methods=["POST"])])
        )

    def task_body(self, annotations: dict[str, str]) -> dict[str, Any]:
        body = task_manifest(self.namespace, self.org_id, agent=self.name)
        body["spec"]["requestedBy"] = f"agent:{self.name}"
        body["metadata"]["annotations"] = annotations
        return body

    async def plan(self, request: Request) -> JSONResponse:
        command = json.loads(await request.body())
        self.commands.append(command)
        body = self.task_body({"humanwork.io/plan-request": command["planRequest"]})
        kclient.CustomObjectsApi(self.api).create_namespaced_custom_object(
            "humanwork.io", "v1alpha1", self.namespace, "agentictasks", body
        )
        answer = {"name": body["metadata"]["name"], "created": True, "steps": []}
        return JSONResponse(answer, status_code=201)


@pytest.fixture
def llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def settings(
    database_url: str, platform_kubeconfig: Path, endpoints_file: Path, llm: FakeOpenAI
) -> Settings:
    return make_settings(
        database_url,
        kubeconfig=str(platform_kubeconfig),
        agent_endpoints_file=endpoints_file,
        router_llm_base_url=llm.url,
        router_llm_model="router-model",
    )


@pytest.fixture
def agents(
    cluster: Cluster, orgs: Orgs, endpoints_file: Path
) -> Iterator[dict[str, SpecialistAgent]]:
    kclient.CoreV1Api(cluster.api).create_namespaced_secret(
        orgs.ns_a,
        kclient.V1Secret(
            metadata=kclient.V1ObjectMeta(name="llm"), string_data={"api-key": LLM_KEY}
        ),
    )
    for name, specialist in SPECIALISTS.items():
        create_instance(cluster, orgs.ns_a, orgs.org_a, name=name, specialist=specialist)
    for name in SPECIALISTS:
        wait_phase(cluster, orgs.ns_a, "Ready", name=name)
    fakes = {name: SpecialistAgent(cluster, orgs.ns_a, orgs.org_a, name) for name in SPECIALISTS}
    with fakes["shop"].server, fakes["books"].server:
        endpoints_file.write_text(
            json.dumps({f"{orgs.ns_a}/{n}": f.server.url for n, f in fakes.items()})
        )
        yield fakes
    for fake in fakes.values():
        fake.api.close()


async def route(client: httpx.AsyncClient, orgs: Orgs, request: str) -> httpx.Response:
    return await client.post(
        f"/orgs/{orgs.org_a}/tasks", json={"request": request}, headers=orgs.requester.headers
    )


def annotations(cluster: Cluster, task_id: str) -> dict[str, str]:
    ns, name = task_id.split("/")
    task: Any = kclient.CustomObjectsApi(cluster.api).get_namespaced_custom_object(
        "humanwork.io", "v1alpha1", ns, "agentictasks", name
    )
    return dict(task["metadata"].get("annotations") or {})


async def audit_row(client: httpx.AsyncClient, api: Api, task_id: str) -> dict[str, Any]:
    root = await api.admin()
    r = await client.get(
        "/audit", params={"action": "task.plan_requested", "limit": 500}, headers=root.headers
    )
    assert r.status_code == 200, r.text
    found = [i for i in r.json()["items"] if i["target"] == f"task:{task_id}"]
    assert len(found) == 1
    return dict(found[0])


async def test_a_request_goes_to_the_agent_whose_keywords_fit(
    cluster: Cluster,
    client: httpx.AsyncClient,
    api: Api,
    orgs: Orgs,
    agents: dict[str, SpecialistAgent],
    llm: FakeOpenAI,
) -> None:
    r = await route(client, orgs, "Update Shopify inventory from the October Amazon orders")
    assert r.status_code == 201, r.text
    shop = r.json()
    assert shop["agent"] == f"{orgs.ns_a}/shop" and shop["routedBy"] == "keywords"
    assert shop["routingReason"] == "keywords matched: shopify, amazon, inventory (3 points)"
    assert len(agents["shop"].commands) == 1 and agents["books"].commands == []
    assert agents["shop"].commands[0]["request"].startswith("Update Shopify")

    marks = annotations(cluster, shop["id"])
    assert marks[ROUTED_BY] == "keywords" and marks[REASON] == shop["routingReason"]
    assert marks["humanwork.io/requester"] == orgs.requester.username
    row = await audit_row(client, api, shop["id"])
    assert row["actor"] == orgs.requester.username
    assert row["details"]["agent"] == f"{orgs.ns_a}/shop"
    assert row["details"]["routedBy"] == "keywords"
    assert row["details"]["routingReason"] == shop["routingReason"]
    assert row["details"]["requesterBound"] is True

    r = await route(client, orgs, "Pay the purchase orders of Acme and send the invoice")
    assert r.status_code == 201, r.text
    assert r.json()["agent"] == f"{orgs.ns_a}/books"
    assert len(agents["books"].commands) == 1
    assert llm.requests == []  # the keywords decided: the LLM was never asked


async def test_the_llm_decides_what_the_keywords_leave_open(
    cluster: Cluster,
    client: httpx.AsyncClient,
    orgs: Orgs,
    agents: dict[str, SpecialistAgent],
    llm: FakeOpenAI,
) -> None:
    llm.tool_call("choose_agent", {"agent": "books", "reason": "a question about bookkeeping"})
    r = await route(client, orgs, "How much did we spend with Acme last quarter?")
    assert r.status_code == 201, r.text
    assert (r.json()["agent"], r.json()["routedBy"]) == (f"{orgs.ns_a}/books", "llm")
    assert annotations(cluster, r.json()["id"])[REASON] == "LLM: a question about bookkeeping"
    asked = llm.requests[0]
    assert asked.body["model"] == "router-model"
    assert "- shop: specialist Bob" in asked.messages[0]["content"]
    assert "- books: specialist Fin" in asked.messages[0]["content"]
    assert asked.messages[1]["content"] == "How much did we spend with Acme last quarter?"

    # the model names no agent of the org: nothing fits, nothing is sent
    llm.tool_call("choose_agent", {"agent": "hr", "reason": "payroll"})
    r = await route(client, orgs, "Run the payroll")
    assert r.status_code == 422 and r.json()["code"] == "no_agent_fits", r.text
    assert r.json()["details"] == {"agents": "books, shop"}
    # a tie between specialists the model does not break: refused, with the candidates
    llm.fail(500)
    r = await route(client, orgs, "Reconcile the Amazon invoice")
    assert r.status_code == 409 and r.json()["code"] == "routing_ambiguous", r.text
    assert r.json()["details"] == {"candidates": "books, shop"}
    assert len(agents["books"].commands) == 1 and agents["shop"].commands == []


async def test_refusals_have_stable_codes(
    client: httpx.AsyncClient, orgs: Orgs, agents: dict[str, SpecialistAgent]
) -> None:
    body = {"request": "Update Shopify inventory"}
    none = await client.post(f"/orgs/{orgs.org_b}/tasks", json=body, headers=orgs.admin_b.headers)
    assert none.status_code == 409 and none.json()["code"] == "org_has_no_agent", none.text
    viewer = await client.post(f"/orgs/{orgs.org_a}/tasks", json=body, headers=orgs.viewer.headers)
    assert viewer.status_code == 403 and viewer.json()["code"] == "forbidden"
    outsider = await client.post(
        f"/orgs/{orgs.org_a}/tasks", json=body, headers=orgs.expert_b.headers
    )
    assert outsider.status_code == 404
    bad = await client.post(
        f"/orgs/{orgs.org_a}/tasks", json={"request": ""}, headers=orgs.requester.headers
    )
    assert bad.status_code == 422 and bad.json()["code"] == "validation_failed"
    assert agents["shop"].commands == [] and agents["books"].commands == []


async def test_only_the_platform_may_write_how_a_task_was_routed(
    cluster: Cluster, client: httpx.AsyncClient, orgs: Orgs, agents: dict[str, SpecialistAgent]
) -> None:
    shop = agents["shop"]
    tasks = kclient.CustomObjectsApi(shop.api)
    # an agent cannot create a task claiming the router chose it ...
    forged = shop.task_body({ROUTED_BY: "keywords", REASON: "keywords matched: everything"})
    with pytest.raises(kclient.ApiException) as created:
        tasks.create_namespaced_custom_object(
            "humanwork.io", "v1alpha1", orgs.ns_a, "agentictasks", forged
        )
    assert created.value.status == 403 and "routed-by" in str(created.value.body)
    # ... nor rewrite why on a task the platform routed to it
    r = await route(client, orgs, "Update the Shopify listing")
    assert r.status_code == 201, r.text
    name = r.json()["id"].split("/")[1]
    with pytest.raises(kclient.ApiException) as changed:
        tasks.patch_namespaced_custom_object(
            "humanwork.io",
            "v1alpha1",
            orgs.ns_a,
            "agentictasks",
            name,
            {"metadata": {"annotations": {REASON: "the requester insisted"}}},
        )
    assert changed.value.status == 403
    assert annotations(cluster, r.json()["id"])[REASON].startswith("keywords matched: shopify")
