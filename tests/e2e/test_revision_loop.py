"""The revision loop (issue 14, item 2; seed 000) with the agent as a process and the
offline planner: a step rejected with feedback makes the platform ask the agent for a
revised plan, shown with what it changed; the bound on revisions ends the request
rejected, and the client's conversation is told once."""

from __future__ import annotations

import time
import uuid
from typing import Any

from tests.e2e.conftest import World

FEEDBACK = "Only September, please"


async def _revision_of(world: World, name: str, within: float = 60) -> str:
    """The name of the revised task the platform asked for after `name` was rejected."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        for row in await world.audit("task.revision_requested"):
            if row["target"].endswith(f"/{name}") and row["details"].get("revision"):
                return str(row["details"]["revision"])
        await _pause()
    raise AssertionError(f"no revision of {name} was asked for\n{world.agent.tail(40)}")


async def _pause() -> None:
    import asyncio

    await asyncio.sleep(0.3)


async def _detail(world: World, name: str, step: str) -> dict[str, Any]:
    r = await world.http.get(
        f"{world.platform.url}/human-tasks/{world.namespace}/{name}/{step}", headers=world.expert
    )
    assert r.status_code == 200, r.text
    found: dict[str, Any] = r.json()
    return found


async def test_a_rejection_with_feedback_brings_a_revised_plan_until_the_bound(
    world: World,
) -> None:
    conversation = str(uuid.uuid4())
    r = await world.http.post(
        f"{world.platform.url}/orgs/{world.org_id}/conversations",
        json={"id": conversation, "subject": "October reconciliation"},
        headers=world.admin,
    )
    assert r.status_code == 201, r.text
    r = await world.ask_platform(conversationId=conversation)
    assert r.status_code == 201, r.text
    name = r.json()["id"].split("/")[1]
    first = r.json()["steps"][0]["id"]
    original = (await world.task(name))["spec"]["steps"]

    r = await world.decide(name, first, "reject", feedback=FEEDBACK)
    assert r.status_code == 200, r.text
    revised = await _revision_of(world, name)
    task = await world.until(revised, lambda t: bool((t.get("status") or {}).get("steps")))
    spec = task["spec"]
    assert spec["revisionOf"] == name and spec["conversationId"] == conversation
    assert spec["steps"] != original  # a visibly different plan: the feedback's period

    # the expert sees what changed against the rejected plan
    step = spec["steps"][0]["id"]
    detail = await _detail(world, revised, step)
    diff = detail["revision"]
    assert diff["revision_of"] == f"{world.namespace}/{name}"
    assert diff["feedback"] == FEEDBACK
    assert diff["added"] or diff["removed"] or diff["changed"]
    changed = [p for c in diff["changed"] for p in c["parameters"].values()]
    assert any(p["before"] != p["after"] for p in changed) or diff["added"]
    # the requester the platform vouched for carries over to the revision
    assert detail["requested_by"] != "agent:agent"
    # the request goes on: its ending is not told yet (the step's rejection may be: the
    # conversation follows each step)
    said = [m["content"] for m in detail["conversation"]["messages"]]
    assert not any(s.startswith("The request") for s in said)

    # rejected again: the bound (one revision here) ends the request rejected
    r = await world.decide(revised, step, "reject", feedback="Still not right")
    assert r.status_code == 200, r.text
    deadline = time.monotonic() + 60
    while not any(
        row["target"].endswith(f"/{revised}") for row in await world.audit("task.revision_limit")
    ):
        assert time.monotonic() < deadline, world.agent.tail(40)
        await _pause()

    async def told() -> list[str]:
        messages = (await _detail(world, revised, step))["conversation"]["messages"]
        return [
            m["content"]
            for m in messages
            if m["role"] == "system" and m["content"].startswith("The request")
        ]

    deadline = time.monotonic() + 30
    while not await told():
        assert time.monotonic() < deadline
        await _pause()
    await _pause()
    assert await told() == [
        f"The request “{spec['description']}” was rejected by an expert; it was revised as "
        "often as allowed."
    ]
    assert [
        row for row in await world.audit("task.revision_requested") if revised in row["target"]
    ] == []
