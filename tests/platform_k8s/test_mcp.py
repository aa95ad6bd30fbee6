"""The MCP endpoint for agents (`/v1/agent-api/mcp`), from the attacker's side, with the
official SDK's client (`mcp.client.streamable_http`) against the running platform: an
agent is shown only the tools it may use, not another org's; a consequential call without
an approval, or with arguments other than the approved ones, reaches nothing upstream; an
approved one runs once, however often it is replayed; a revoked token lists nothing.
The upstream is the fake Shopify (a local HTTP server) that counts every side effect."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from fastapi import FastAPI
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client

from humanwork_core.receipts import call_digest
from humanwork_dev.fakes.shopify import FakeShopify
from tests.agents import agent_credentials, provision_agent
from tests.conftest import Cluster
from tests.platform_k8s.conftest import Orgs, TaskApi
from tests.platform_k8s.test_tool_proxy import FIX, MUG, agent, enable, shop, write_plan

__all__ = ["agent", "shop"]

URL = "http://platform/v1/agent-api/mcp"
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
ACCEPT = {"Accept": "application/json, text/event-stream"}


@asynccontextmanager
async def mcp_session(app: FastAPI, headers: dict[str, str]) -> AsyncIterator[ClientSession]:
    """An initialised MCP session of the SDK's client, talking to `app` in process."""
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), headers=headers, timeout=60)
    async with (
        http,
        streamable_http_client(URL, http_client=http) as (r, w, _),
        ClientSession(r, w) as session,
    ):
        await session.initialize()
        yield session


async def names(app: FastAPI, headers: dict[str, str]) -> dict[str, types.Tool]:
    async with mcp_session(app, headers) as session:
        return {t.name: t for t in (await session.list_tools()).tools}


async def test_an_agent_lists_only_its_own_tools_and_a_revoked_token_lists_nothing(
    app: FastAPI, client: httpx.AsyncClient, cluster: Cluster, orgs: Orgs
) -> None:
    # org A enables shopify and amazon; its agent lists shopify only (amazon disabled on it)
    provision_agent(cluster, orgs.ns_a, orgs.org_a, enabledTools=["shopify"])
    for tool in ("shopify", "amazon"):
        await enable(client, orgs.admin_a, orgs.org_a, tool)
    # org B enables amazon only; its agent lists both
    provision_agent(cluster, orgs.ns_b, orgs.org_b, enabledTools=["shopify", "amazon"])
    await enable(client, orgs.admin_b, orgs.org_b, "amazon")
    token_a, _ = agent_credentials(cluster, orgs.ns_a)
    token_b, _ = agent_credentials(cluster, orgs.ns_b)
    a = {"Authorization": f"Bearer {token_a}"}
    b = {"Authorization": f"Bearer {token_b}"}

    seen_a = await names(app, a)
    assert set(seen_a) == {
        "shopify_listOrders",
        "shopify_getOrder",
        "shopify_listProducts",
        "shopify_getInventoryLevels",
        "shopify_setInventoryLevel",
        "shopify_adjustInventoryLevel",
    }
    write = seen_a["shopify_setInventoryLevel"]
    assert write.meta is not None and write.meta["humanwork.io/risk"] == "high"
    assert write.meta["humanwork.io/sideEffect"] is True
    assert write.annotations is not None and write.annotations.readOnlyHint is False
    assert "available" in write.inputSchema["required"]
    read = seen_a["shopify_listProducts"]
    assert read.meta is not None and read.meta["humanwork.io/risk"] == "low"
    assert read.meta["humanwork.io/sideEffect"] is False
    seen_b = await names(app, b)
    assert set(seen_b) == {
        "amazon_listOrders",
        "amazon_getOrder",
        "amazon_getOrderItems",
        "amazon_updateListingQuantity",
    }

    # the org narrows shopify to two actions: the others leave the list at once
    narrowed = await client.put(
        f"/orgs/{orgs.org_a}/tool-permissions/shopify",
        json={"enabled": True, "config": {"allowedActions": ["listProducts", "getOrder"]}},
        headers=orgs.admin_a.headers,
    )
    assert narrowed.status_code == 200, narrowed.text
    assert set(await names(app, a)) == {"shopify_listProducts", "shopify_getOrder"}

    # no token, and then a revoked one: refused before any MCP message is read
    anonymous = await client.post("/v1/agent-api/mcp", json=LIST, headers=ACCEPT)
    assert anonymous.status_code == 401 and anonymous.json()["code"] == "unauthenticated"
    assert "tools" not in anonymous.text
    revoked = await client.post(
        f"/orgs/{orgs.org_a}/agents/agent/token/revoke", headers=orgs.admin_a.headers
    )
    assert revoked.status_code == 202, revoked.text
    refused = await client.post("/v1/agent-api/mcp", json=LIST, headers={**a, **ACCEPT})
    assert refused.status_code == 401, refused.text
    assert refused.json()["details"]["reason"] == "token_revoked"
    assert "shopify_" not in refused.text
    # beside it, B's token lists B's tools through the same raw request
    listed = await client.post("/v1/agent-api/mcp", json=LIST, headers={**b, **ACCEPT})
    assert listed.status_code == 200, listed.text
    assert {t["name"] for t in listed.json()["result"]["tools"]} == set(seen_b)


def outcome(result: types.CallToolResult) -> dict[str, Any]:
    assert result.structuredContent is not None
    return result.structuredContent


async def test_a_consequential_call_runs_only_as_the_approved_step_and_once(
    app: FastAPI,
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
    step = {"humanwork.io/task": name, "humanwork.io/step": "fix"}
    async with mcp_session(app, agent) as session:
        # a read the org allows answers at once
        read = await session.call_tool("shopify_listProducts", {})
        assert read.isError is False and outcome(read)["result"]["products"]

        # no step named, then the step before an expert approved it: nothing upstream
        bare = await session.call_tool("shopify_adjustInventoryLevel", FIX)
        assert bare.isError is True and outcome(bare)["code"] == "approval_required"
        assert outcome(bare)["details"]["reason"] == "no_step"
        filing = outcome(bare)["details"]["howToFile"]
        assert filing["step"]["parameters"] == {"action": "adjustInventoryLevel", "params": FIX}
        early = await session.call_tool("shopify_adjustInventoryLevel", FIX, meta=step)
        assert early.isError is True and outcome(early)["code"] == "approval_required"
        assert outcome(early)["details"]["reason"] == "not_approved"
        assert shop.side_effects == []

        assert (await tasks.decide(orgs.expert, task["id"], "fix")).status_code == 200

        # other arguments than the approved ones: refused, nothing upstream
        other = {**FIX, "available_adjustment": -30}
        changed = await session.call_tool("shopify_adjustInventoryLevel", other, meta=step)
        assert changed.isError is True and outcome(changed)["code"] == "approval_required"
        assert outcome(changed)["details"]["reason"] == "tool_call_mismatch"
        assert shop.side_effects == []

        # the approved call runs once; a replay answers the first result, runs nothing
        done = await session.call_tool("shopify_adjustInventoryLevel", FIX, meta=step)
        assert done.isError is False, done
        assert outcome(done)["replayed"] is False and outcome(done)["sideEffecting"] is True
        again = await session.call_tool("shopify_adjustInventoryLevel", FIX, meta=step)
        assert again.isError is False and outcome(again)["replayed"] is True
        assert outcome(again)["result"] == outcome(done)["result"]
        # with the platform's signed receipt of the call: the replay's is the very same
        receipt = outcome(done)["receipt"]
        assert receipt["step"] == "fix" and receipt["task"]["name"] == name
        assert receipt["callDigest"] == call_digest("shopify", "adjustInventoryLevel", FIX)
        assert outcome(again)["receipt"] == receipt
        assert outcome(read)["receipt"]["task"] is None
    assert len(shop.side_effects) == 1
    assert shop.inventory(MUG) == before - 3
    assert shop.access_token not in str(outcome(done))
    audit = await client.get(
        "/audit", params={"action": "tool.called"}, headers=orgs.admin_a.headers
    )
    assert {row["details"]["action"] for row in audit.json()["items"]} >= {
        "listProducts",
        "adjustInventoryLevel",
    }
