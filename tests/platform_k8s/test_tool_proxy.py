"""The tool proxy, from the attacker's side: an agent holding a valid token still cannot
cause a side effect no expert approved, cannot repeat an approved one, cannot use a tool
its org did not enable, cannot reach another org's task, and never sees a credential.
The upstream is a real local HTTP server (humanwork_dev/fakes) that counts every side effect."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from humanwork_dev.fakes import catalog
from humanwork_dev.fakes.shopify import FakeShopify
from tests.agents import agent_credentials, provision_agent
from tests.conftest import Cluster
from tests.platform.conftest import Caller
from tests.platform_k8s.conftest import Orgs, TaskApi

MUG = catalog.BY_SKU[catalog.DISCREPANT_SKU].inventory_item_id
WAREHOUSE = catalog.WAREHOUSE_LOCATION_ID
FIX = {"location_id": WAREHOUSE, "inventory_item_id": MUG, "available_adjustment": -3}


@pytest.fixture
def shop() -> Iterator[FakeShopify]:
    with FakeShopify() as fake:
        yield fake


async def enable(client: httpx.AsyncClient, admin: Caller, org: str, tool: str) -> None:
    r = await client.put(
        f"/orgs/{org}/tool-permissions/{tool}", json={"enabled": True}, headers=admin.headers
    )
    assert r.status_code == 200, r.text


async def store_credentials(
    client: httpx.AsyncClient, admin: Caller, org: str, kind: str, values: dict[str, str]
) -> None:
    r = await client.put(
        f"/orgs/{org}/integrations/{kind}", json={"credentials": values}, headers=admin.headers
    )
    assert r.status_code in (200, 201), r.text


@pytest.fixture
async def agent(
    client: httpx.AsyncClient, cluster: Cluster, orgs: Orgs, shop: FakeShopify
) -> dict[str, str]:
    """Org A's agent (its token header), Shopify enabled and pointed at the fake."""
    provision_agent(cluster, orgs.ns_a, orgs.org_a)
    await enable(client, orgs.admin_a, orgs.org_a, "shopify")
    await store_credentials(client, orgs.admin_a, orgs.org_a, "shopify", shop.credentials())
    token, _ = agent_credentials(cluster, orgs.ns_a)
    return {"Authorization": f"Bearer {token}"}


def write_plan(params: dict[str, Any]) -> dict[str, Any]:
    return {
        "agentRef": "agent",
        "description": "Fix the mug's warehouse stock",
        "steps": [
            {
                "id": "fix",
                "description": "Lower HW-MUG-001 at the warehouse by 3",
                "kind": "action",
                "tool": "shopify",
                "parameters": {"action": "adjustInventoryLevel", "params": params},
                "risk": "high",
            }
        ],
    }


async def call(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    action: str,
    params: dict[str, Any],
    *,
    tool: str = "shopify",
    key: str | None = None,
    task: str | None = None,
    step: str | None = None,
) -> httpx.Response:
    body = {"action": action, "params": params, "idempotencyKey": key, "task": task, "step": step}
    return await client.post(f"/v1/agent-api/tools/{tool}", json=body, headers=headers)


async def test_reads_run_without_approval_and_never_return_a_credential(
    client: httpx.AsyncClient, orgs: Orgs, agent: dict[str, str], shop: FakeShopify
) -> None:
    r = await call(client, agent, "listProducts", {})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["sideEffecting"] is False and body["replayed"] is False
    skus = {v["sku"] for p in body["result"]["products"] for v in p["variants"]}
    assert catalog.DISCREPANT_SKU in skus
    assert shop.access_token not in r.text
    assert shop.side_effects == []
    audit = await client.get(
        "/audit", params={"action": "tool.called"}, headers=orgs.admin_a.headers
    )
    row = audit.json()["items"][0]
    assert row["actor"] == f"agent:{orgs.ns_a}/agent" and row["outcome"] == "success"
    assert row["details"]["action"] == "listProducts"
    assert shop.access_token not in audit.text


async def test_a_side_effect_needs_the_exact_approved_step_and_happens_once(
    client: httpx.AsyncClient,
    tasks: TaskApi,
    orgs: Orgs,
    agent: dict[str, str],
    shop: FakeShopify,
) -> None:
    before = shop.inventory(MUG)
    assert before is not None
    task = await tasks.create(orgs.requester, orgs.org_a, **write_plan(FIX))
    name = task["id"].split("/")[1]

    no_step = await call(client, agent, "adjustInventoryLevel", FIX, key="k0")
    assert no_step.status_code == 403 and no_step.json()["details"]["reason"] == "no_step"
    unapproved = await call(
        client, agent, "adjustInventoryLevel", FIX, key="k1", task=name, step="fix"
    )
    assert unapproved.status_code == 403, unapproved.text
    assert unapproved.json()["code"] == "step_not_approved"
    assert unapproved.json()["details"]["reason"] == "not_approved"
    assert shop.side_effects == []

    decided = await tasks.decide(orgs.expert, task["id"], "fix")
    assert decided.status_code == 200, decided.text

    other = {**FIX, "available_adjustment": -30}
    mismatch = await call(
        client, agent, "adjustInventoryLevel", other, key="k2", task=name, step="fix"
    )
    assert mismatch.status_code == 403
    assert mismatch.json()["details"]["reason"] == "tool_call_mismatch"
    assert shop.side_effects == []

    done = await call(client, agent, "adjustInventoryLevel", FIX, key="k3", task=name, step="fix")
    assert done.status_code == 200, done.text
    assert done.json()["replayed"] is False and done.json()["sideEffecting"] is True
    assert shop.inventory(MUG) == before - 3
    assert len(shop.side_effects) == 1

    # the same call again, with the same key or with fresh ones, even many at once: the
    # first result comes back and the upstream is not called again
    again = await call(client, agent, "adjustInventoryLevel", FIX, key="k3", task=name, step="fix")
    assert again.status_code == 200 and again.json()["replayed"] is True
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json()["result"] == done.json()["result"]
    burst = await asyncio.gather(
        *(
            call(
                client, agent, "adjustInventoryLevel", FIX, key=f"fresh-{i}", task=name, step="fix"
            )
            for i in range(8)
        )
    )
    assert all(r.status_code in (200, 409) for r in burst), [r.text for r in burst]
    assert len(shop.side_effects) == 1
    assert shop.inventory(MUG) == before - 3


async def test_the_same_call_at_once_reaches_the_upstream_once(
    client: httpx.AsyncClient,
    tasks: TaskApi,
    orgs: Orgs,
    agent: dict[str, str],
    shop: FakeShopify,
) -> None:
    task = await tasks.create(orgs.requester, orgs.org_a, **write_plan(FIX))
    name = task["id"].split("/")[1]
    assert (await tasks.decide(orgs.expert, task["id"], "fix")).status_code == 200
    answers = await asyncio.gather(
        *(
            call(client, agent, "adjustInventoryLevel", FIX, key="same", task=name, step="fix")
            for _ in range(10)
        )
    )
    statuses = sorted(r.status_code for r in answers)
    assert statuses.count(200) >= 1 and set(statuses) <= {200, 409}, statuses
    assert len(shop.side_effects) == 1


async def test_tools_the_org_did_not_enable_and_unknown_ones_are_refused(
    client: httpx.AsyncClient, agent: dict[str, str]
) -> None:
    amazon = await call(client, agent, "listOrders", {}, tool="amazon")
    assert amazon.status_code == 403 and amazon.json()["code"] == "tool_not_permitted"
    unknown = await call(client, agent, "anything", {}, tool="stripe")
    assert unknown.status_code == 404 and unknown.json()["code"] == "unknown_tool"
    action = await call(client, agent, "dropTables", {})
    assert action.status_code == 422 and action.json()["code"] == "unknown_action"
    anonymous = await client.post(
        "/v1/agent-api/tools/shopify", json={"action": "listProducts", "params": {}}
    )
    assert anonymous.status_code == 401


async def test_another_orgs_agent_cannot_use_this_orgs_approval(
    client: httpx.AsyncClient,
    cluster: Cluster,
    tasks: TaskApi,
    orgs: Orgs,
    agent: dict[str, str],
    shop: FakeShopify,
) -> None:
    task = await tasks.create(orgs.requester, orgs.org_a, **write_plan(FIX))
    name = task["id"].split("/")[1]
    assert (await tasks.decide(orgs.expert, task["id"], "fix")).status_code == 200
    provision_agent(cluster, orgs.ns_b, orgs.org_b)
    await enable(client, orgs.admin_b, orgs.org_b, "shopify")
    token_b, _ = agent_credentials(cluster, orgs.ns_b)
    other = {"Authorization": f"Bearer {token_b}"}
    stolen = await call(client, other, "adjustInventoryLevel", FIX, key="b1", task=name, step="fix")
    assert stolen.status_code == 403
    assert stolen.json()["details"]["reason"] == "task_not_found"  # B sees only its namespace
    # and org B has no Shopify credentials of its own: A's are never used for B
    reads = await call(client, other, "listProducts", {})
    assert reads.status_code == 409 and reads.json()["code"] == "integration_missing"
    assert shop.side_effects == []
    assert all(r.path.endswith("products.json") is False for r in shop.requests)
