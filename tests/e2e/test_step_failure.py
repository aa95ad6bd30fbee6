"""Failure as a first-class path, with the real agent process, operator and platform and the
fake Shopify made to fail (issue 15, item 9).

A step whose tool call fails ends `Failed` with the upstream's reason, the agent emits
`task.step_failed`, the task fails, and the expert sees why in the detail view. Where the
action catalog says the action is safe to retry (a read; a write that sets an absolute
value), the expert retries it (`POST /human-tasks/{id}/retry`, audited; not the requester)
and the step runs once more; a delta write is never retried.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from humanwork_dev.fakes import catalog
from tests.e2e.conftest import World, execution_state, step_of

MUG = catalog.BY_SKU[catalog.DISCREPANT_SKU].inventory_item_id
WAREHOUSE = catalog.WAREHOUSE_LOCATION_ID
READ = {"action": "listProducts", "params": {"limit": 50}}
SET = {
    "action": "setInventoryLevel",
    "params": {"location_id": WAREHOUSE, "inventory_item_id": MUG, "available": 7},
}
ADJUST = {
    "action": "adjustInventoryLevel",
    "params": {"location_id": WAREHOUSE, "inventory_item_id": MUG, "available_adjustment": -3},
}


async def approved(world: World, parameters: dict[str, Any], risk: str) -> str:
    """A one-step task of the world's agent, approved by the expert; its name."""
    body = {
        "orgId": world.org_id,
        "agentRef": "agent",
        "conversationId": str(uuid.uuid4()),
        "description": f"Run {parameters['action']}",
        "steps": [
            {
                "id": "work",
                "description": f"Run {parameters['action']}",
                "kind": "action",
                "tool": "shopify",
                "parameters": parameters,
                "risk": risk,
            }
        ],
    }
    r = await world.http.post(
        f"{world.platform.url}/agentic/tasks", json=body, headers=world.requester
    )
    assert r.status_code == 201, r.text
    name: str = r.json()["id"].split("/")[1]
    decided = await world.decide(name, "work")
    assert decided.status_code == 200, decided.text
    return name


def phase(task: dict[str, Any]) -> str | None:
    return (task.get("status") or {}).get("phase")


async def failed(world: World, name: str) -> dict[str, Any]:
    """Wait for the step and the task to fail; the detail view the expert sees."""
    task = await world.until(
        name, lambda t: execution_state(t, "work") == "Failed" and phase(t) == "Failed"
    )
    assert step_of(task, "work").get("state") == "Failed"
    r = await world.http.get(
        f"{world.platform.url}/human-tasks/{world.namespace}/{name}/work", headers=world.expert
    )
    assert r.status_code == 200, r.text
    detail: dict[str, Any] = r.json()
    assert detail["status"] == "failed" and detail["phase"] == "Failed", detail
    return detail


async def in_queue(world: World, name: str) -> dict[str, Any] | None:
    """The step's item in the review queue, once the index has seen the failure."""
    item_id = f"{world.namespace}/{name}/work"
    for _ in range(50):
        queue = await world.http.get(f"{world.platform.url}/human-tasks", headers=world.expert)
        assert queue.status_code == 200, queue.text
        items = {i["id"]: i for i in queue.json()["items"]}
        if item_id in items:
            found: dict[str, Any] = items[item_id]
            return found
        await asyncio.sleep(0.2)
    return None


async def retry(world: World, name: str, headers: dict[str, str]) -> Any:
    return await world.http.post(
        f"{world.platform.url}/human-tasks/{world.namespace}/{name}/work/retry",
        json={"note": "the store is back"},
        headers=headers,
    )


async def step_failed_events(world: World, name: str) -> list[dict[str, Any]]:
    rows = await world.audit("agent.task.step_failed")
    return [r for r in rows if r["target"].endswith(f"/{name}")]


async def test_a_failed_read_shows_why_and_the_experts_retry_completes_it(world: World) -> None:
    world.shop.fail_next(404, path_contains="products.json", body={"errors": "Not Found"})
    name = await approved(world, READ, "low")
    detail = await failed(world, name)
    [step] = detail["plan"]
    assert step["retry_safe"] is True
    queued = await in_queue(world, name)  # the expert finds it in the review queue
    assert queued is not None and queued["status"] == "failed" and queued["deadline"] is None
    error = step["execution"]["error"]
    assert error.startswith("upstream_error (upstream answered 404)"), error
    [event] = await step_failed_events(world, name)
    payload = event["details"]["payload"]
    assert payload["code"] == "upstream_error" and payload["upstreamStatus"] == "404"
    assert payload["retrySafe"] is True
    assert len(world.shop.requests_to("products.json")) == 1  # no blind resends

    own = await retry(world, name, world.requester)
    assert own.status_code == 403 and own.json()["code"] == "self_approval_forbidden", own.text
    r = await retry(world, name, world.expert)
    assert r.status_code == 200, r.text
    assert r.json()["attempt"] == 1 and r.json()["resolution"]["outcome"] == "retry"
    task = await world.until(name, lambda t: phase(t) == "Completed")
    work = step_of(task, "work")
    assert work["execution"]["state"] == "Succeeded" and work["execution"]["attempt"] == 2
    assert len(world.shop.requests_to("products.json")) >= 2
    audit = await world.audit("task.step.retried")
    assert any(row["target"].endswith(f"/{name}") for row in audit)
    again = await retry(world, name, world.expert)  # nothing failed any more
    assert again.status_code == 409, again.text
    assert again.json()["details"]["reason"] in ("step_not_failed", "task_terminal"), again.text


async def test_a_refused_absolute_write_is_retried_past_the_stored_refusal(world: World) -> None:
    world.shop.fail_next(
        422, path_contains="inventory_levels/set.json", body={"errors": "location busy"}
    )
    name = await approved(world, SET, "high")
    detail = await failed(world, name)
    assert detail["plan"][0]["retry_safe"] is True
    assert world.shop.side_effects == []
    r = await retry(world, name, world.expert)
    assert r.status_code == 200, r.text
    assert r.json()["ledger"] == "released"  # the proxy's stored refusal no longer replays
    await world.until(name, lambda t: phase(t) == "Completed")
    assert len(world.shop.side_effects) == 1
    assert world.shop.inventory(MUG) == 7


async def test_a_failed_delta_write_is_never_retried(world: World) -> None:
    before = world.shop.inventory(MUG)
    world.shop.fail_next(
        422, path_contains="inventory_levels/adjust.json", body={"errors": "not stocked"}
    )
    name = await approved(world, ADJUST, "high")
    detail = await failed(world, name)
    assert detail["plan"][0]["retry_safe"] is False
    r = await retry(world, name, world.expert)
    assert r.status_code == 409, r.text
    assert r.json()["code"] == "conflict"
    assert r.json()["details"]["reason"] == "step_not_retryable"
    task = await world.task(name)
    assert phase(task) == "Failed"
    assert world.shop.side_effects == [] and world.shop.inventory(MUG) == before
    assert await in_queue(world, name) is None  # nothing an expert could do there
