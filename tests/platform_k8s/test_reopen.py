"""Expiry as seed 001 describes it (issue 15, item 8), through the API on the real control
plane with the operator running: a decision that ran out of time keeps the run blocked
(phase PendingApproval, the step Expired and undecidable: 410 `human_task_expired`) until
an expert with `run.control` reopens it with a new deadline (audited); then it can be
decided. A task whose policy says `onExpiry: End` ends in phase Expired and stays ended."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from tests.platform_k8s.conftest import Orgs, TaskApi

EXPIRES_FAST = {"decisionDeadlineSeconds": 2, "escalation": {"maxEscalations": 0}}


def _step(task: dict[str, Any], step_id: str) -> dict[str, Any]:
    return next((s for s in task["status"].get("steps") or [] if s["id"] == step_id), {})


async def test_an_expired_decision_waits_for_a_reopening_then_can_be_decided(
    client: httpx.AsyncClient, tasks: TaskApi, orgs: Orgs
) -> None:
    made = await tasks.create(orgs.requester, orgs.org_a, policy=EXPIRES_FAST)
    task_id = made["id"]
    url = f"/human-tasks/{task_id}/read/reopen"
    r = await client.post(url, json={"deadline_seconds": 600}, headers=orgs.expert.headers)
    assert r.status_code == 409 and r.json()["details"]["reason"] == "decision_not_expired"
    task = await tasks.until(
        orgs.expert, task_id, lambda t: _step(t, "read").get("state") == "Expired"
    )
    assert task["status"]["phase"] == "PendingApproval"  # blocked, not ended
    late = await tasks.decide(orgs.expert, task_id, "read")
    assert late.status_code == 410 and late.json()["code"] == "human_task_expired"

    r = await client.post(url, json={"deadline_seconds": 600}, headers=orgs.viewer.headers)
    assert r.status_code == 403 and r.json()["details"] == {"capability": "run.control"}
    r = await client.post(url, json={"deadline_seconds": 5}, headers=orgs.expert.headers)
    assert r.status_code == 422 and r.json()["code"] == "validation_failed"
    r = await client.post(url, json={"deadline_seconds": 600}, headers=orgs.admin_b.headers)
    assert r.status_code == 404  # another org's admin

    before = datetime.now(UTC)
    r = await client.post(
        url,
        json={"deadline_seconds": 600, "reason": "back from lunch"},
        headers=orgs.expert.headers,
    )
    assert r.status_code == 200, r.text
    reopened = r.json()
    deadline = datetime.fromisoformat(reopened["deadline"])
    assert reopened["reopened"]["by"] == orgs.expert.username
    assert reopened["reopened"]["count"] == 1 and reopened["reopened"]["deadlineSeconds"] == 600
    assert before + timedelta(seconds=599) < deadline < datetime.now(UTC) + timedelta(seconds=601)
    again = await client.post(url, json={}, headers=orgs.expert.headers)
    assert again.status_code == 409 and again.json()["details"]["reason"] == "decision_not_expired"

    # the operator gives the step its new deadline; the decision goes through
    task = await tasks.until(
        orgs.expert, task_id, lambda t: _step(t, "read").get("state") == "Pending"
    )
    assert datetime.fromisoformat(_step(task, "read")["deadline"]) == deadline
    assert datetime.fromisoformat(task["status"]["nextDeadline"]) == deadline
    decided = await tasks.decide(orgs.expert, task_id, "read")
    assert decided.status_code == 200, decided.text

    audit = await client.get(
        "/audit",
        params={"org": orgs.org_a, "action": "task.step.reopened"},
        headers=orgs.admin_a.headers,
    )
    rows = audit.json()["items"]
    assert len(rows) == 1 and rows[0]["actor"] == orgs.expert.username
    assert rows[0]["details"]["step_id"] == "read"
    assert rows[0]["details"]["reason"] == "back from lunch"
    assert abs(datetime.fromisoformat(rows[0]["details"]["deadline"]) - deadline) < timedelta(
        seconds=1
    )


async def test_under_on_expiry_end_the_task_ends_and_nothing_reopens_it(
    client: httpx.AsyncClient, tasks: TaskApi, orgs: Orgs
) -> None:
    made = await tasks.create(
        orgs.requester, orgs.org_a, policy={**EXPIRES_FAST, "onExpiry": "End"}
    )
    await tasks.until(orgs.expert, made["id"], lambda t: t["status"].get("phase") == "Expired")
    r = await client.post(
        f"/human-tasks/{made['id']}/read/reopen", json={}, headers=orgs.expert.headers
    )
    assert r.status_code == 409 and r.json()["details"]["reason"] == "task_terminal", r.text
