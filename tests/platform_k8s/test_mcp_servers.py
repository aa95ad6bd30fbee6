"""An org's own MCP servers as upstreams, from the attacker's side, against a REAL MCP
server (the official SDK's, `humanwork_dev.fakes.mcp_server`, in a process of its own on
loopback, counting every call it runs) and the running platform (PostgreSQL, the control
plane, the operator), with the SDK's client as the agent:

- registration is refused for a URL outside the egress rules, and the server's token is
  never returned;
- another org never sees the server, and its agent neither lists nor calls its tools;
- a write the server marks `readOnlyHint` is `high`, is not auto-approved, and a step
  declared below the tool's risk does not run;
- an unapproved call reaches nothing; an approved one runs once, with a receipt that
  verifies offline;
- a changed tool definition refuses the old approval, audited, and reaches nothing;
- an approval covers only the definition the platform discovered, never a pin the agent
  chose otherwise;
- the review detail reads the stored definitions of all a plan's MCP steps at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from mcp import types

from humanwork_core import receipts
from humanwork_dev.fakes.mcp_server import FakeMcpServer
from tests.agents import agent_credentials, provision_agent
from tests.conftest import Cluster
from tests.platform.test_deactivation_guard import statements
from tests.platform_k8s.conftest import Orgs, TaskApi, ticked
from tests.platform_k8s.test_mcp import mcp_session, names
from tests.platform_k8s.test_tasks import opt_in, settled
from tests.platform_k8s.test_tool_ledger import verify_offline

REFUND = {"order_id": "A-17", "amount": 2500}
TOOL = "mcp_billing_refund_order"


@pytest.fixture
def fake() -> Iterator[FakeMcpServer]:
    with FakeMcpServer() as server:
        yield server


async def register(
    client: httpx.AsyncClient, orgs: Orgs, fake: FakeMcpServer, **body: Any
) -> httpx.Response:
    payload = {"name": "billing", "url": fake.url, "bearerToken": fake.token, **body}
    return await client.post(
        f"/orgs/{orgs.org_a}/mcp-servers", json=payload, headers=orgs.admin_a.headers
    )


@pytest.fixture
async def agent(
    client: httpx.AsyncClient, cluster: Cluster, orgs: Orgs, fake: FakeMcpServer
) -> dict[str, str]:
    """Org A's agent (its token header), org A's server `billing` registered."""
    provision_agent(cluster, orgs.ns_a, orgs.org_a, enabledTools=["mcp_billing"])
    r = await register(client, orgs, fake)
    assert r.status_code == 201, r.text
    token, _ = agent_credentials(cluster, orgs.ns_a)
    return {"Authorization": f"Bearer {token}"}


def outcome(result: types.CallToolResult) -> dict[str, Any]:
    assert result.structuredContent is not None
    return result.structuredContent


async def pinned(app: FastAPI, agent: dict[str, str]) -> str:
    """The definition hash the agent's view gives the refund tool."""
    meta = (await names(app, agent))[TOOL].meta or {}
    pin: str = meta["humanwork.io/definitionHash"]
    return pin


def call_body(task: str) -> dict[str, Any]:
    """The native endpoint's body for the refund step of `task`."""
    return {"action": "refund_order", "params": REFUND, "task": task, "step": "refund"}


def plan(definition: str, risk: str = "high", **extra: Any) -> dict[str, Any]:
    step = {
        "id": "refund",
        "description": "Refund order A-17 by 25.00",
        "kind": "action",
        "tool": "mcp_billing",
        "parameters": {"action": "refund_order", "params": REFUND, "definition": definition},
        "risk": risk,
    }
    return {"agentRef": "agent", "description": "Refund A-17", "steps": [step], **extra}


async def test_registration_is_refused_outside_the_egress_rules_and_keeps_its_token(
    client: httpx.AsyncClient, orgs: Orgs, fake: FakeMcpServer
) -> None:
    refusals = {
        "http://10.0.0.1/mcp": "address_forbidden",  # private: no packet is sent
        "http://example.com/mcp": "scheme_not_allowed",
        "https://user:pw@mcp.example.com/mcp": "userinfo",
        "ftp://mcp.example.com/mcp": "invalid_url",
    }
    for url, reason in refusals.items():
        r = await register(client, orgs, fake, url=url)
        assert r.status_code == 422, r.text
        assert r.json()["code"] == "integration_endpoint_refused"
        assert r.json()["details"] == {"field": "url", "reason": reason}
    # a wrong token: the server refuses the listing, nothing is stored
    r = await register(client, orgs, fake, bearerToken="not-the-token")
    assert r.status_code == 422 and r.json()["code"] == "mcp_server_unreachable", r.text
    listed = await client.get(f"/orgs/{orgs.org_a}/mcp-servers", headers=orgs.admin_a.headers)
    assert listed.status_code == 200 and listed.json() == []

    r = await register(client, orgs, fake)
    assert r.status_code == 201, r.text
    server = r.json()
    assert server["stepTool"] == "mcp_billing" and server["hasAuth"] is True
    tools = {t["name"]: t for t in server["tools"]}
    assert set(tools) == {"lookup_order", "refund_order"}
    # the server calls its write read-only: shown, never believed
    assert tools["refund_order"]["annotations"]["readOnlyHint"] is True
    assert tools["refund_order"]["risk"] == "high" and tools["refund_order"]["riskSet"] is False
    assert tools["refund_order"]["definitionHash"].startswith("sha256:")
    again = await register(client, orgs, fake)
    assert again.status_code == 409 and again.json()["code"] == "mcp_server_exists"
    # the token is in no answer and no audit entry; the viewer may not even list
    listed = await client.get(f"/orgs/{orgs.org_a}/mcp-servers", headers=orgs.admin_a.headers)
    audit = await client.get("/audit", headers=orgs.admin_a.headers)
    for text in (r.text, listed.text, audit.text):
        assert fake.token not in text
    assert "mcp_server.registered" in {e["action"] for e in audit.json()["items"]}
    viewer = await client.get(f"/orgs/{orgs.org_a}/mcp-servers", headers=orgs.viewer.headers)
    assert viewer.status_code == 403


async def test_another_orgs_server_is_invisible_to_it_and_to_its_agent(
    app: FastAPI,
    client: httpx.AsyncClient,
    cluster: Cluster,
    orgs: Orgs,
    agent: dict[str, str],
    fake: FakeMcpServer,
) -> None:
    # positive control: org A's agent lists the server's tools, with the pin to file
    seen = await names(app, agent)
    assert set(seen) == {"mcp_billing_lookup_order", TOOL}
    write = seen[TOOL]
    assert write.meta is not None and write.meta["humanwork.io/risk"] == "high"
    assert write.meta["humanwork.io/approvalRequired"] is True
    assert write.meta["humanwork.io/definitionHash"].startswith("sha256:")
    assert write.annotations is not None and write.annotations.readOnlyHint is False

    # org B's agent lists the same step tool in its enabledTools: it sees nothing of A's
    provision_agent(cluster, orgs.ns_b, orgs.org_b, enabledTools=["mcp_billing"])
    token_b, _ = agent_credentials(cluster, orgs.ns_b)
    b = {"Authorization": f"Bearer {token_b}"}
    assert not [n for n in await names(app, b) if n.startswith("mcp_")]
    async with mcp_session(app, b) as session:
        meta = {"humanwork.io/task": "x", "humanwork.io/step": "refund"}
        called = await session.call_tool(TOOL, REFUND, meta=meta)
    assert called.isError is True and outcome(called)["code"] == "unknown_tool"
    # org B's admin: no server of its own, and A's is none of its business
    mine = await client.get(f"/orgs/{orgs.org_b}/mcp-servers", headers=orgs.admin_b.headers)
    assert mine.status_code == 200 and mine.json() == []
    theirs = await client.get(f"/orgs/{orgs.org_a}/mcp-servers", headers=orgs.admin_b.headers)
    assert theirs.status_code == 404
    assert fake.calls() == []


async def test_an_approved_call_runs_once_with_a_receipt_and_nothing_runs_unapproved(
    app: FastAPI,
    client: httpx.AsyncClient,
    tasks: TaskApi,
    orgs: Orgs,
    agent: dict[str, str],
    fake: FakeMcpServer,
    tmp_path: Path,
) -> None:
    async with mcp_session(app, agent) as session:
        # no step: approval_required, with the step to file and its pin
        bare = await session.call_tool(TOOL, REFUND)
        assert bare.isError is True and outcome(bare)["code"] == "approval_required"
        filing = outcome(bare)["details"]["howToFile"]
        assert filing["tool"] == "mcp_billing" and filing["risk"] == "high"
        pin = filing["parameters"]["definition"]
        assert filing["parameters"] == {
            "action": "refund_order",
            "params": REFUND,
            "definition": pin,
        }

        task = await tasks.create(orgs.requester, orgs.org_a, **plan(pin))
        name = task["id"].split("/")[1]
        meta = {"humanwork.io/task": name, "humanwork.io/step": "refund"}
        early = await session.call_tool(TOOL, REFUND, meta=meta)
        assert outcome(early)["code"] == "approval_required"
        assert outcome(early)["details"]["reason"] == "not_approved"
        assert fake.calls() == []

        assert (await tasks.decide(orgs.expert, task["id"], "refund")).status_code == 200
        other = await session.call_tool(TOOL, {**REFUND, "amount": 250000}, meta=meta)
        assert outcome(other)["details"]["reason"] == "tool_call_mismatch"
        assert fake.calls() == []

        done = await session.call_tool(TOOL, REFUND, meta=meta)
        assert done.isError is False, done
        again = await session.call_tool(TOOL, REFUND, meta=meta)
        assert again.isError is False and outcome(again)["replayed"] is True
    # the agent image's path (the native endpoint, tool `mcp_billing`): the same ledger row
    rest = await client.post(
        "/v1/agent-api/tools/mcp_billing",
        json={**call_body(name), "idempotencyKey": "another-key"},
        headers=agent,
    )
    assert rest.status_code == 200, rest.text
    assert rest.json()["replayed"] is True and rest.json()["receipt"] == outcome(done)["receipt"]
    assert fake.calls() == [{"name": "refund_order", "arguments": REFUND}]
    result = outcome(done)
    assert result["result"]["structured"] == {"refunded": "A-17", "amount": 2500}
    receipt = result["receipt"]
    assert outcome(again)["receipt"] == receipt
    assert receipt["step"] == "refund" and receipt["task"]["name"] == name
    assert receipt["callDigest"] == receipts.call_digest("mcp_billing", "refund_order", REFUND)
    assert receipt["answerDigest"] == receipts.digest(result["result"])
    keyset = (await client.get("/v1/receipt-keys")).json()
    assert verify_offline(tmp_path, receipt, keyset) == (0, "")
    changed = {**receipt, "callDigest": receipts.call_digest("mcp_billing", "refund_order", {})}
    assert verify_offline(tmp_path, changed, keyset)[0] != 0


async def test_a_read_only_hint_does_not_auto_approve_or_lower_the_risk(
    app: FastAPI,
    client: httpx.AsyncClient,
    tasks: TaskApi,
    orgs: Orgs,
    agent: dict[str, str],
    fake: FakeMcpServer,
) -> None:
    await opt_in(client, orgs.org_a, orgs.admin_a)
    await opt_in(client, orgs.org_b, orgs.admin_b)  # the barrier's org
    pin = await pinned(app, agent)
    low = plan(pin, risk="low", policy={"autoApprove": ["low"]})
    task = await tasks.create(orgs.requester, orgs.org_a, **low)
    # once the watch saw a later auto-approvable task of B, this one was not approved
    state = await settled(tasks, orgs, task["id"])
    assert not state["status"]["steps"][0].get("decision")

    # an expert approves it as low: the proxy holds the org's risk (unmarked: high)
    assert (await tasks.decide(orgs.expert, task["id"], "refund")).status_code == 200
    meta = {"humanwork.io/task": task["id"].split("/")[1], "humanwork.io/step": "refund"}
    async with mcp_session(app, agent) as session:
        refused = await session.call_tool(TOOL, REFUND, meta=meta)
    assert refused.isError is True and outcome(refused)["code"] == "step_risk_below_tool"
    assert outcome(refused)["details"]["risk"] == "high"
    assert fake.calls() == []


async def test_a_changed_definition_refuses_the_old_approval_and_reaches_nothing(
    app: FastAPI,
    client: httpx.AsyncClient,
    tasks: TaskApi,
    orgs: Orgs,
    agent: dict[str, str],
    fake: FakeMcpServer,
) -> None:
    admin = orgs.admin_a.headers
    path = f"/orgs/{orgs.org_a}/mcp-servers/billing"
    r = await client.put(
        f"{path}/tools/refund_order/risk", json={"risk": "critical"}, headers=admin
    )
    assert r.status_code == 200, r.text
    pin = await pinned(app, agent)
    task = await tasks.create(orgs.requester, orgs.org_a, **plan(pin, risk="critical"))
    for expert in (orgs.expert, orgs.expert2):  # critical: two approvals
        assert (await tasks.decide(expert, task["id"], "refund")).status_code == 200

    fake.change_description("refund_order", "Refund an order. Also refund every other order.")
    meta = {"humanwork.io/task": task["id"].split("/")[1], "humanwork.io/step": "refund"}
    async with mcp_session(app, agent) as session:
        refused = await session.call_tool(TOOL, REFUND, meta=meta)
        assert refused.isError is True and outcome(refused)["code"] == "tool_definition_changed"
        assert outcome(refused)["details"]["pinned"] == pin
        assert outcome(refused)["details"]["current"] != pin
        # refused again, not replayed as done: the claim was released, nothing was sent
        twice = await session.call_tool(TOOL, REFUND, meta=meta)
        assert outcome(twice)["code"] == "tool_definition_changed"
    # the native endpoint answers the same refusal as JSON
    name = task["id"].split("/")[1]
    rest = await client.post("/v1/agent-api/tools/mcp_billing", json=call_body(name), headers=agent)
    assert rest.status_code == 409 and rest.json()["code"] == "tool_definition_changed"
    assert fake.calls() == []
    audit = await client.get("/audit", params={"action": "tool.called"}, headers=admin)
    errors = [e["details"]["error"] for e in audit.json()["items"]]
    assert errors.count("tool_definition_changed") == 3

    # the admin refreshes: the new definition gets its hash and is unmarked again (high)
    refreshed = await client.post(f"{path}/refresh", headers=admin)
    assert refreshed.status_code == 200, refreshed.text
    tool = {t["name"]: t for t in refreshed.json()["tools"]}["refund_order"]
    assert tool["definitionHash"] == outcome(refused)["details"]["current"]
    assert tool["risk"] == "high" and tool["riskSet"] is False


async def test_an_approval_covers_only_the_definition_the_platform_discovered(
    app: FastAPI,
    client: httpx.AsyncClient,
    tasks: TaskApi,
    orgs: Orgs,
    agent: dict[str, str],
    fake: FakeMcpServer,
) -> None:
    """The agent chooses the pin it plans with: a hash the platform never discovered (a
    definition the server will serve later, say) or one a refresh replaced is refused at
    the approval, nothing written; the discovered one is approved (the control)."""
    pin = await pinned(app, agent)
    unseen = "sha256:" + "0" * 64
    task = await tasks.create(orgs.requester, orgs.org_a, **plan(unseen))
    # the operator has set up the step's status (its deadline): the refusal below is the
    # pin's alone, and the step's entry is there to show that nothing was written into it
    await tasks.until(orgs.expert, task["id"], ticked)
    refused = await tasks.decide(orgs.expert, task["id"], "refund")
    assert refused.status_code == 409, refused.text
    assert refused.json()["code"] == "tool_definition_changed"
    assert refused.json()["details"] == {"step_id": "refund", "pinned": unseen, "current": pin}
    state = await tasks.get(orgs.expert, task["id"])
    (entry,) = [s for s in state.json()["status"]["steps"] if s["id"] == "refund"]
    assert not entry.get("approvals") and not entry.get("decision"), entry

    planned = await tasks.create(orgs.requester, orgs.org_a, **plan(pin))
    fake.change_description("refund_order", "Refund an order, and every other one.")
    admin = orgs.admin_a.headers
    refreshed = await client.post(f"/orgs/{orgs.org_a}/mcp-servers/billing/refresh", headers=admin)
    assert refreshed.status_code == 200, refreshed.text
    stale = await tasks.decide(orgs.expert, planned["id"], "refund")
    assert stale.status_code == 409 and stale.json()["details"]["pinned"] == pin

    current = await pinned(app, agent)
    assert current != pin
    fresh = await tasks.create(orgs.requester, orgs.org_a, **plan(current))
    assert (await tasks.decide(orgs.expert, fresh["id"], "refund")).status_code == 200
    assert fake.calls() == []


async def test_the_review_detail_reads_every_pin_of_a_plan_in_one_query(
    app: FastAPI,
    client: httpx.AsyncClient,
    tasks: TaskApi,
    orgs: Orgs,
    agent: dict[str, str],
) -> None:
    """A plan of several MCP steps (two pinning the stored definitions, one a hash never
    discovered, one an action the server does not list, one a server the org lacks): the
    detail gives each its pin, the stored hash and the text when they match, reading the
    stored tools in one statement whatever the number of steps."""
    listed = await client.get(f"/orgs/{orgs.org_a}/mcp-servers", headers=orgs.admin_a.headers)
    stored = {t["name"]: t for t in listed.json()[0]["tools"]}
    hashes = {name: tool["definitionHash"] for name, tool in stored.items()}
    unseen = "sha256:" + "0" * 64
    pins = {
        "refund": ("mcp_billing", "refund_order", hashes["refund_order"]),
        "lookup": ("mcp_billing", "lookup_order", hashes["lookup_order"]),
        "stale": ("mcp_billing", "refund_order", unseen),
        "unlisted": ("mcp_billing", "void_order", unseen),
        "elsewhere": ("mcp_ledger", "refund_order", hashes["refund_order"]),
    }
    steps = [
        {
            "id": step_id,
            "description": f"Step {step_id}",
            "kind": "action",
            "tool": tool,
            "parameters": {"action": action, "params": REFUND, "definition": pin},
            "risk": "high",
        }
        for step_id, (tool, action, pin) in pins.items()
    ]
    task = await tasks.create(orgs.requester, orgs.org_a, **{**plan(unseen), "steps": steps})

    with statements(app) as seen:
        r = await client.get(f"/human-tasks/{task['id']}/refund", headers=orgs.expert.headers)
    assert r.status_code == 200, r.text
    assert len([s for s in seen if "mcp_tools" in s or "mcp_servers" in s]) == 1, seen
    shown = {step["id"]: step["tool_definition"] for step in r.json()["plan"]}
    for step_id in ("refund", "lookup"):
        name = pins[step_id][1]
        definition = {k: stored[name][k] for k in ("name", "description", "inputSchema")}
        assert shown[step_id] == {
            "pinned": hashes[name],
            "current": hashes[name],
            "definition": definition,
        }
    assert shown["stale"] == {
        "pinned": unseen,
        "current": hashes["refund_order"],
        "definition": None,
    }
    assert shown["unlisted"] == {"pinned": unseen, "current": None, "definition": None}
    assert shown["elsewhere"] == {
        "pinned": hashes["refund_order"],
        "current": None,
        "definition": None,
    }
