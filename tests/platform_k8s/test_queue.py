"""`GET /human-tasks`: the review queue fed by the platform's watch of AgenticTasks."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from tests.platform.conftest import Api, Caller
from tests.platform_k8s.conftest import Orgs, TaskApi, ticked, until

STEP = {"id": "only", "description": "Refund order 17", "tool": "shopify_refund", "risk": "high"}


async def queue(client: httpx.AsyncClient, caller: Caller, **params: Any) -> dict[str, Any]:
    r = await client.get("/human-tasks", params=params, headers=caller.headers)
    assert r.status_code == 200, r.text
    page: dict[str, Any] = r.json()
    return page


async def test_the_queue_lists_open_decisions_deadline_first(
    tasks: TaskApi, orgs: Orgs, client: httpx.AsyncClient
) -> None:
    later = await tasks.create(
        orgs.requester, orgs.org_a, steps=[STEP], policy={"decisionDeadlineSeconds": 7200}
    )
    soon = await tasks.create(
        orgs.requester, orgs.org_a, steps=[STEP], policy={"decisionDeadlineSeconds": 300}
    )
    middle = await tasks.create(
        orgs.requester, orgs.org_a, steps=[STEP], policy={"decisionDeadlineSeconds": 3600}
    )
    page = await until(
        lambda: queue(client, orgs.viewer),
        lambda p: p["total"] == 3 and all(i["deadline"] for i in p["items"]),
    )
    assert [i["task_id"] for i in page["items"]] == [soon["id"], middle["id"], later["id"]]
    assert [i["near_deadline"] for i in page["items"]] == [True, False, False]
    assert page["pending_count"] == 3
    first = page["items"][0]
    assert first["id"] == f"{soon['id']}/only" and first["run_id"] == soon["uid"]
    assert (first["status"], first["risk"], first["workflow"]) == ("pending", "high", "shop")
    assert first["summary"] == soon["spec"]["description"] and first["age_seconds"] >= 0

    paged = await queue(client, orgs.viewer, org_id=orgs.org_a, limit=1, offset=1)
    assert [i["task_id"] for i in paged["items"]] == [middle["id"]]
    assert (paged["total"], paged["pending_count"]) == (3, 3)

    # another org sees none of them, and cannot ask for org A's queue
    assert (await queue(client, orgs.expert_b))["pending_count"] == 0
    r = await client.get(
        "/human-tasks", params={"org_id": orgs.org_a}, headers=orgs.expert_b.headers
    )
    assert r.status_code == 404 and r.json()["code"] == "not_found"

    # a decided step leaves the queue
    r = await tasks.decide(orgs.expert, soon["id"], "only")
    assert r.status_code == 200, r.text
    page = await until(lambda: queue(client, orgs.viewer), lambda p: p["total"] == 2)
    assert [i["task_id"] for i in page["items"]] == [middle["id"], later["id"]]


async def test_an_escalated_decision_is_flagged(
    tasks: TaskApi, orgs: Orgs, client: httpx.AsyncClient
) -> None:
    made = await tasks.create(
        orgs.requester,
        orgs.org_a,
        steps=[STEP],
        policy={
            "decisionDeadlineSeconds": 1,
            "escalation": {"intervalSeconds": 3600, "maxEscalations": 1},
        },
    )
    page = await until(
        lambda: queue(client, orgs.expert),
        lambda p: any(i["status"] == "escalated" for i in p["items"]),
    )
    item = next(i for i in page["items"] if i["task_id"] == made["id"])
    assert item["escalations"] == 1 and item["near_deadline"] is False


async def test_resume_is_idempotent_by_key(
    tasks: TaskApi, orgs: Orgs, api: Api, client: httpx.AsyncClient
) -> None:
    root = await api.admin()
    runner = await api.user(root, f"runner-{uuid.uuid4().hex[:6]}", "operator", [orgs.org_a])
    made = await tasks.create(orgs.requester, orgs.org_a, steps=[STEP])
    await tasks.until(orgs.expert, made["id"], ticked)
    url = f"/human-tasks/{made['id']}/only/resume"
    body = {"action": "approve", "feedback": "ok"}

    r = await client.post(url, json=body, headers=orgs.viewer.headers)
    assert r.status_code == 403 and r.json()["code"] == "forbidden"  # no run.control
    r = await client.post(url, json=body, headers=orgs.requester.headers)
    assert r.status_code == 403 and r.json()["code"] == "self_approval_forbidden"
    r = await client.post(url, json=body, headers=orgs.admin_b.headers)
    assert r.status_code == 404 and r.json()["code"] == "not_found"

    headers = {**runner.headers, "Idempotency-Key": "resume-0001"}
    first = await client.post(url, json=body, headers=headers)
    assert first.status_code == 200, first.text
    assert first.json()["decision"]["by"] == runner.username
    assert first.json()["decision"]["idempotencyKey"] == "resume-0001"
    again = await client.post(url, json=body, headers=headers)
    assert again.status_code == 200 and again.content == first.content
    other = await client.post(url, json={"action": "approve", "feedback": "x"}, headers=headers)
    assert other.status_code == 422 and other.json()["code"] == "idempotency_conflict"
    other = await client.post(url, json={"action": "reject", "feedback": "ok"}, headers=headers)
    assert other.status_code == 422 and other.json()["code"] == "idempotency_conflict"

    audit = await client.get(
        "/audit",
        params={"org": orgs.org_a, "action": "task.step.approve"},
        headers=orgs.admin_a.headers,
    )
    rows = audit.json()["items"]
    assert [row["details"]["idempotency_key"] for row in rows] == ["resume-0001"]
    fresh = await client.post(url, json=body, headers=runner.headers)
    assert fresh.status_code == 409 and fresh.json()["code"] == "run_state_conflict"


async def test_resume_answers_input_steps(
    tasks: TaskApi, orgs: Orgs, api: Api, client: httpx.AsyncClient
) -> None:
    root = await api.admin()
    runner = await api.user(root, f"runner-{uuid.uuid4().hex[:6]}", "operator", [orgs.org_a])
    choose = {
        "id": "choose",
        "description": "Refund or replace?",
        "kind": "input",
        "options": ["refund", "replace"],
        "risk": "low",
    }
    made = await tasks.create(orgs.requester, orgs.org_a, steps=[choose])
    await tasks.until(orgs.expert, made["id"], ticked)
    url = f"/human-tasks/{made['id']}/choose/resume"
    r = await client.post(url, json={"action": "select"}, headers=runner.headers)
    assert r.status_code == 422 and r.json()["code"] == "validation_failed"
    r = await client.post(url, json={"action": "approve"}, headers=runner.headers)
    assert r.status_code == 422 and r.json()["code"] == "invalid_decision"
    r = await client.post(
        url, json={"action": "select", "selection": "upgrade"}, headers=runner.headers
    )
    assert r.status_code == 422 and r.json()["code"] == "invalid_decision"
    r = await client.post(
        url, json={"action": "select", "selection": "replace"}, headers=runner.headers
    )
    assert r.status_code == 200, r.text
    assert r.json()["decision"]["selection"] == "replace"
    task = await tasks.until(orgs.expert, made["id"], lambda t: t["phase"] == "InProgress")
    assert task["status"]["steps"][0]["decision"]["verdict"] == "select"
