"""The demo agent on the MCP path (`HUMANWORK_TOOL_PATH=mcp`, what the operator gives it
under `agent_tool_path: mcp`), end to end: the operator, the platform API, the agent as a
process and the fake upstreams. The seed's example runs as on the native path: nothing
before its approval, the approved write once, and a signed receipt of it that verifies
with the published key; every tool call went to `/v1/agent-api/mcp`, none to the native
endpoint."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from humanwork_core import receipts
from humanwork_core.tokens import KeySet
from humanwork_dev.fakes import catalog
from humanwork_dev.processes import PlatformProcess
from tests.conftest import Cluster
from tests.e2e.conftest import World, execution_state, open_world
from tests.e2e.test_approve_execute import FIX, phase

MCP = "POST /v1/agent-api/mcp "
NATIVE = "POST /v1/agent-api/tools/"


@pytest.fixture
async def mcp_world(
    cluster: Cluster, platform_server: PlatformProcess, tmp_path: Path
) -> AsyncIterator[World]:
    async with open_world(
        cluster, platform_server, tmp_path, agent_env={"HUMANWORK_TOOL_PATH": "mcp"}
    ) as made:
        yield made


def requests_logged(world: World, line: str) -> int:
    """How many requests the platform's access log shows with `line` in them."""
    return world.platform.log.read_text(errors="replace").count(line)


async def test_the_agent_on_the_mcp_path_runs_the_approved_step_once_with_a_receipt(
    mcp_world: World,
) -> None:
    world = mcp_world
    mcp_before, native_before = requests_logged(world, MCP), requests_logged(world, NATIVE)
    planned = await world.plan()
    name = planned["name"]
    read, write = planned["steps"]
    assert world.shop.side_effects == []

    r = await world.decide(name, read["id"])
    assert r.status_code == 200, r.text
    await world.until(name, lambda t: execution_state(t, read["id"]) == "Succeeded")
    assert world.shop.side_effects == []  # the write waits for its own approval
    r = await world.resume(name, write["id"], action="edit", parameters=FIX)
    assert r.status_code == 200, r.text
    task = await world.until(name, lambda t: phase(t) in ("Completed", "Failed"))
    assert phase(task) == "Completed", task
    assert len(world.shop.side_effects) == 1
    assert world.shop.levels() == catalog.expected_inventory_after_reconcile()

    # the tool calls took the MCP path
    assert requests_logged(world, MCP) >= mcp_before + 2
    assert requests_logged(world, NATIVE) == native_before

    # the write's signed receipt, kept with the task, verifies with the published key
    listed = await world.http.get(
        f"{world.platform.url}/agentic/tasks/{world.namespace}/{name}/receipts",
        headers=world.expert,
    )
    assert listed.status_code == 200, listed.text
    mine = [r for r in listed.json()["items"] if r["step"] == write["id"]]
    assert len(mine) == 1, listed.json()
    receipt = mine[0]
    assert receipt["tool"] == "shopify" and receipt["action"] == FIX["action"]
    assert receipt["callDigest"] == receipts.call_digest("shopify", FIX["action"], FIX["params"])
    assert receipt["answerStatus"] == 200
    published = (await world.http.get(f"{world.platform.url}/v1/receipt-keys")).json()
    keys = KeySet.from_jwks(published)
    assert receipts.verify(receipt, keys) == receipt
    with pytest.raises(receipts.ReceiptSignatureMismatch):
        receipts.verify({**receipt, "answerStatus": 201}, keys)
