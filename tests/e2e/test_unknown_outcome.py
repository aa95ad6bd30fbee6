"""One approval, one side effect, with the real agent process executing the step and an
upstream that misbehaves (issue 12, item 4).

The fake Shopify applies the approved write and then answers late (after the proxy's
timeout) or 503, or answers 503 without applying it. The agent's executor, which would
retry a failing call every second, records `OutcomeUnknown` instead; the task waits for a
human (PendingApproval, not Failed), shows up in the review queue, and the upstream counts
exactly one side effect (or none) over the whole window. An expert resolves it: `applied`
completes the step from the proxy's ledger without calling again; `not_applied` lets the
agent call once more, and the write then happens once.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes import client

from tests.e2e.conftest import World, execution_state, step_of
from tests.e2e.writes import MUG, approved_write

PROXY_TIMEOUT = 10.0  # the platform's default upstream timeout
RETRY_WINDOW = 6.0  # the executor retried every second here before


async def resolve(world: World, name: str, outcome: str) -> dict[str, Any]:
    r = await world.http.post(
        f"{world.platform.url}/human-tasks/{world.namespace}/{name}/fix/resolve",
        json={"outcome": outcome, "note": "checked the Shopify admin"},
        headers=world.expert,
    )
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    return answer


async def wait_unknown(world: World, name: str) -> dict[str, Any]:
    task = await world.until(
        name,
        lambda t: (
            execution_state(t, "fix") == "OutcomeUnknown"
            and step_of(t, "fix").get("state") == "OutcomeUnknown"
        ),
        within=PROXY_TIMEOUT + 40,
    )
    assert (task.get("status") or {}).get("phase") == "PendingApproval", task
    return task


def event_reasons(world: World, name: str) -> set[str]:
    listed = client.CoreV1Api(world.cluster.api).list_namespaced_event(
        world.namespace,
        field_selector=f"involvedObject.kind=AgenticTask,involvedObject.name={name}",
    )
    return {e.reason for e in listed.items}


async def shown_to_experts(world: World, name: str) -> None:
    item_id = f"{world.namespace}/{name}/fix"
    r = await world.http.get(f"{world.platform.url}/human-tasks/{item_id}", headers=world.expert)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "outcome_unknown", r.text
    for _ in range(50):
        queue = await world.http.get(f"{world.platform.url}/human-tasks", headers=world.expert)
        assert queue.status_code == 200, queue.text
        items = {i["id"]: i for i in queue.json()["items"]}
        if item_id in items:
            assert items[item_id]["status"] == "outcome_unknown"
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"{item_id} is not in the review queue")


@pytest.mark.parametrize("mode", ["late", "503"])
async def test_an_applied_write_whose_answer_is_lost_happens_once(world: World, mode: str) -> None:
    before = world.shop.inventory(MUG)
    assert before is not None
    world.shop.misbehave_after_write(mode, seconds=PROXY_TIMEOUT + 2)
    name = await approved_write(world)
    await wait_unknown(world, name)
    world.shop.behave()
    await asyncio.sleep(RETRY_WINDOW)  # the window in which the executor used to retry
    assert len(world.shop.side_effects) == 1, world.shop.side_effects
    task = await world.task(name)
    assert execution_state(task, "fix") == "OutcomeUnknown"
    await shown_to_experts(world, name)
    assert "OutcomeUnknown" in event_reasons(world, name)  # kubectl describe shows it
    assert "TaskFailed" not in event_reasons(world, name)

    answer = await resolve(world, name, "applied")
    assert answer["ledger"] == "finished" and answer["attempt"] >= 1
    task = await world.until(name, lambda t: (t.get("status") or {}).get("phase") == "Completed")
    fix = step_of(task, "fix")
    assert fix["execution"]["state"] == "Succeeded"
    assert fix["resolution"]["outcome"] == "applied"
    assert len(world.shop.side_effects) == 1  # completed from the ledger, not called again
    assert world.shop.inventory(MUG) == before - 3
    audit = await world.audit("task.step.resolved")
    assert any(row["target"].endswith(f"/{name}") for row in audit)


async def test_a_write_the_expert_finds_not_applied_is_called_once_more(world: World) -> None:
    before = world.shop.inventory(MUG)
    assert before is not None
    # a 503 from in front of the shop: the write never reached it, the proxy cannot know
    world.shop.fail_next(503, path_contains="inventory_levels/adjust.json")
    name = await approved_write(world)
    await wait_unknown(world, name)
    await asyncio.sleep(RETRY_WINDOW)
    assert world.shop.side_effects == []
    assert len(world.shop.requests_to("inventory_levels/adjust.json")) == 1

    # the requester cannot let the side effect run again on their own say-so
    own = await world.http.post(
        f"{world.platform.url}/human-tasks/{world.namespace}/{name}/fix/resolve",
        json={"outcome": "not_applied"},
        headers=world.requester,
    )
    assert own.status_code == 403 and own.json()["code"] == "self_approval_forbidden", own.text
    answer = await resolve(world, name, "not_applied")
    assert answer["ledger"] == "released"
    task = await world.until(name, lambda t: (t.get("status") or {}).get("phase") == "Completed")
    assert step_of(task, "fix")["execution"]["attempt"] >= 2
    assert len(world.shop.side_effects) == 1
    assert len(world.shop.requests_to("inventory_levels/adjust.json")) == 2
    assert world.shop.inventory(MUG) == before - 3
