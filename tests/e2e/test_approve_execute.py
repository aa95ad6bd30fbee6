"""The approve-then-execute loop end to end: operator, platform API, agent process, fake
upstreams, all real processes talking HTTP and the Kubernetes API.

The seed's example becomes a plan with a low-risk read and a high-risk write; each step
runs only after its approval and exactly once; a rejection halts; an expired decision
halts; an agent killed in the middle of a side effect is restarted without repeating it.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timedelta
from typing import Any

from humanwork_dev.fakes import catalog
from tests.e2e.barriers import agent_caught_up
from tests.e2e.conftest import World, _login, execution_state, step_of
from tests.held import HeldRequest

MUG = catalog.BY_SKU[catalog.DISCREPANT_SKU].inventory_item_id
WAREHOUSE = catalog.WAREHOUSE_LOCATION_ID
FIX = {
    "action": "adjustInventoryLevel",
    "params": {
        "location_id": WAREHOUSE,
        "inventory_item_id": MUG,
        "available_adjustment": -catalog.DISCREPANCY,
    },
}


SECOND = timedelta(seconds=1)  # the status's timestamps are to the second


def phase(task: dict[str, object]) -> object:
    return (task.get("status") or {}).get("phase")  # type: ignore[union-attr]


def _at(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


async def _started(world: World, name: str) -> list[dict[str, Any]]:
    """The agent's `step_started` events for the task."""
    return [r for r in await world.audit("agent.task.step_started") if name in r["target"]]


async def test_the_seed_example_executes_each_step_after_its_approval(world: World) -> None:
    planned = await world.plan()
    name = planned["name"]
    steps = planned["steps"]
    assert [s["tool"] for s in steps] == ["amazon", "shopify"], steps
    read, write = steps
    assert read["risk"] == "low" and read["parameters"]["action"] == "listOrders"
    assert write["risk"] in ("high", "critical")
    assert write["parameters"]["action"] in ("adjustInventoryLevel", "setInventoryLevel")

    # nothing runs before an expert decides: the step's only execution started after the
    # decision (its first attempt, the agent's only `step_started` for it)
    task = await world.task(name)
    assert execution_state(task, read["id"]) is None
    assert world.amazon.side_effects == [] and world.shop.side_effects == []
    orders_before = len(world.amazon.requests_to("/orders/v0/orders"))

    r = await world.decide(name, read["id"])
    assert r.status_code == 200, r.text
    task = await world.until(name, lambda t: execution_state(t, read["id"]) == "Succeeded")
    entry = step_of(task, read["id"])
    result = entry["execution"]["result"]
    assert result, task
    assert entry["execution"]["attempt"] == 1
    assert _at(entry["execution"]["startedAt"]) >= _at(entry["decision"]["at"]) - SECOND
    started = [
        row
        for row in await world.audit("agent.task.step_started")
        if name in row["target"] and row["details"].get("step_id") == read["id"]
    ]
    assert len(started) == 1, started
    assert len(world.amazon.requests_to("/orders/v0/orders")) > orders_before
    assert execution_state(task, write["id"]) is None  # step 2 waits for its own approval
    assert world.shop.side_effects == []

    # the expert approves step 2 with the concrete correction found by step 1
    r = await world.resume(name, write["id"], action="edit", parameters=FIX)
    assert r.status_code == 200, r.text
    task = await world.until(name, lambda t: phase(t) == "Completed")
    assert execution_state(task, write["id"]) == "Succeeded"
    assert len(world.shop.side_effects) == 1
    assert world.shop.levels() == catalog.expected_inventory_after_reconcile()

    # the platform's audit log saw the agent's events and tool calls, once each
    for action in (
        "agent.task.plan_ready",
        "agent.task.step_started",
        "agent.task.step_completed",
        "agent.task.completed",
    ):
        rows = [r for r in await world.audit(action) if name in r["target"]]
        assert rows, action
    completed = [r for r in await world.audit("agent.task.completed") if name in r["target"]]
    assert len(completed) == 1
    calls = [r for r in await world.audit("tool.called") if r["details"].get("task") == name]
    assert {(c["details"]["tool"], c["details"]["action"]) for c in calls} >= {
        ("amazon", "listOrders"),
        ("shopify", "adjustInventoryLevel"),
    }


async def test_a_rejection_halts_the_plan_with_its_feedback(world: World) -> None:
    planned = await world.plan()
    name, first = planned["name"], planned["steps"][0]["id"]
    r = await world.decide(name, first, "reject", feedback="Only September, please")
    assert r.status_code == 200, r.text
    task = await world.until(name, lambda t: phase(t) == "Rejected")
    assert execution_state(task, first) is None
    # the feedback reaches the planner: the revised plan names the task it revises (asked
    # at once: a finished task leaves the cluster for the archive after a short while)
    revised = await world.plan(revises=name)
    assert revised["name"] != name
    spec = (await world.task(revised["name"]))["spec"]
    assert spec.get("revisionOf") == name
    # and the rejected step never ran
    await agent_caught_up(world)  # it ran another task's approved step since
    assert execution_state(await world.task(name), first) is None
    assert not await _started(world, name)
    assert world.shop.side_effects == []


async def test_an_expired_decision_halts_and_cannot_be_decided(world: World) -> None:
    policy = {
        "decisionDeadlineSeconds": 1,
        "escalation": {"intervalSeconds": 1, "maxEscalations": 0},
        "onExpiry": "End",
    }
    planned = await world.plan(policy=policy)
    name, first = planned["name"], planned["steps"][0]["id"]
    await world.until(name, lambda t: phase(t) == "Expired", within=30)
    late = await world.decide(name, first)
    assert late.status_code == 410 and late.json()["code"] == "human_task_expired"
    await agent_caught_up(world)  # it ran another task's approved step since
    assert execution_state(await world.task(name), first) is None
    assert not await _started(world, name)


async def test_an_agent_killed_mid_side_effect_does_not_repeat_it(world: World) -> None:
    planned = await world.plan()
    name = planned["name"]
    read, write = planned["steps"]
    assert (await world.decide(name, read["id"])).status_code == 200
    await world.until(name, lambda t: execution_state(t, read["id"]) == "Succeeded")

    held = HeldRequest(world.shop, "inventory_levels/adjust")
    assert (await world.resume(name, write["id"], action="edit", parameters=FIX)).status_code == 200
    await world.until(name, lambda t: execution_state(t, write["id"]) == "Running", within=30)
    # the write reached the upstream, which holds it before applying it; while the
    # upstream is applying the change, the agent dies without a word
    await asyncio.to_thread(held.wait_arrived, 60)
    assert world.shop.side_effects == []
    world.agent.kill()
    held.release()  # the upstream applies the change after its caller died
    world.agent.start()  # the same pod folder: the container restarts, its emptyDir stays

    task = await world.until(name, lambda t: phase(t) == "Completed", within=60)
    execution = step_of(task, write["id"])["execution"]
    assert execution["state"] == "Succeeded" and execution["attempt"] >= 2
    assert len(world.shop.side_effects) == 1
    assert world.shop.levels() == catalog.expected_inventory_after_reconcile()


async def test_an_input_step_asks_the_expert_and_completes_with_the_provided_value(
    world: World,
) -> None:
    planned = await world.plan("Write a thank-you note to our most loyal customer")
    name = planned["name"]
    (step,) = planned["steps"]
    assert step["kind"] == "input"
    deadline = time.monotonic() + 60
    while not (
        asked := [r for r in await world.audit("agent.task.needs_input") if name in r["target"]]
    ):
        assert time.monotonic() < deadline, "the agent never asked for the input"
        await asyncio.sleep(0.2)
    assert len(asked) == 1 and asked[0]["details"]["step_id"] == step["id"]

    note = {"text": "Dear Ada, thank you for ten years with us."}
    r = await world.resume(name, step["id"], action="provide", content=note)
    assert r.status_code == 200, r.text
    task = await world.until(name, lambda t: phase(t) == "Completed")
    assert step_of(task, step["id"])["execution"]["result"] == {"input": note}
    assert world.shop.side_effects == [] and world.amazon.side_effects == []


async def test_a_requester_asks_the_agent_through_the_platform(world: World) -> None:
    asked = await world.ask_platform()
    assert asked.status_code == 201, asked.text
    planned = asked.json()
    assert planned["created"] is True
    assert [s["tool"] for s in planned["steps"]] == ["amazon", "shopify"]
    namespace, name = planned["id"].split("/")
    assert namespace == world.namespace
    task = await world.task(name)
    # the agent's task names itself; the platform vouches for its caller (issue 12, item 3)
    assert task["spec"]["requestedBy"] == "agent:agent"
    assert task["requested_by"].startswith("req-")

    # the requester cannot approve its own plan; an expert can
    own = await world.http.post(
        f"{world.platform.url}/agentic/tasks/{planned['id']}/steps/{planned['steps'][0]['id']}"
        "/approve",
        json={},
        headers=world.requester,
    )
    assert own.status_code == 403 and own.json()["code"] == "self_approval_forbidden"
    assert (await world.decide(name, planned["steps"][0]["id"])).status_code == 200
    await world.until(name, lambda t: execution_state(t, planned["steps"][0]["id"]) == "Succeeded")

    unknown = await world.http.post(
        f"{world.platform.url}/orgs/{world.org_id}/agents/nobody/tasks",
        json={"request": "anything"},
        headers=world.requester,
    )
    assert unknown.status_code == 404
    viewer = f"viewer-{world.namespace}"
    made = await world.http.post(
        f"{world.platform.url}/users",
        json={
            "username": viewer,
            "password": f"pw-{viewer}-0123456789",
            "role": "viewer",
            "org_ids": [world.org_id],
        },
        headers=world.admin,
    )
    assert made.status_code == 201, made.text
    viewer_like = await world.http.post(
        f"{world.platform.url}/orgs/{world.org_id}/agents/agent/tasks",
        json={"request": "anything"},
        headers=await _login(world.http, world.platform.url, viewer, f"pw-{viewer}-0123456789"),
    )  # a viewer: tasks.read, not run.control
    assert viewer_like.status_code == 403
    audit = [r for r in await world.audit("task.plan_requested") if name in r["target"]]
    assert len(audit) == 1
    assert audit[0]["details"]["requesterBound"] is True
