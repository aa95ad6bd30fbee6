"""`POST /human-tasks/bulk-resume`: one decision for many tasks, each independent."""

from __future__ import annotations

from typing import Any

import httpx
from kubernetes import client as kclient

from tests.conftest import Cluster
from tests.platform_k8s.conftest import Orgs, TaskApi, ticked

STEP = {"id": "only", "description": "Refund order 17", "tool": "shopify_refund", "risk": "high"}


def raw_entry(cluster: Cluster, task_id: str) -> dict[str, Any]:
    ns, name = task_id.split("/")
    raw = kclient.CustomObjectsApi(cluster.api).get_namespaced_custom_object(
        "humanwork.io", "v1alpha1", ns, "agentictasks", name
    )
    entry: dict[str, Any] = next(
        (s for s in raw.get("status", {}).get("steps", []) if s["id"] == "only"), {}
    )
    return entry


def platform_part(entry: dict[str, Any]) -> dict[str, Any]:
    """What the platform writes into a step's status: approvals and decision."""
    return {key: entry.get(key) for key in ("approvals", "decision")}


async def approvals(client: httpx.AsyncClient, orgs: Orgs) -> list[dict[str, Any]]:
    r = await client.get(
        "/audit",
        params={"org": orgs.org_a, "action": "task.step.approve", "limit": 100},
        headers=orgs.admin_a.headers,
    )
    assert r.status_code == 200, r.text
    rows: list[dict[str, Any]] = r.json()["items"]
    return rows


async def test_a_mixed_batch_reports_each_item_and_writes_only_the_fine_ones(
    tasks: TaskApi, orgs: Orgs, client: httpx.AsyncClient, cluster: Cluster
) -> None:
    fine = [await tasks.create(orgs.requester, orgs.org_a, steps=[STEP]) for _ in range(2)]
    expired = await tasks.create(
        orgs.requester,
        orgs.org_a,
        steps=[STEP],
        policy={
            "decisionDeadlineSeconds": 1,
            "escalation": {"maxEscalations": 0},
            "onExpiry": "End",
        },
    )
    conflicting = await tasks.create(orgs.requester, orgs.org_a, steps=[STEP])
    foreign = await tasks.create(orgs.admin_b, orgs.org_b, steps=[STEP])
    for made in [*fine, conflicting]:
        await tasks.until(orgs.expert, made["id"], ticked)
    await tasks.until(orgs.expert, expired["id"], lambda t: t["phase"] == "Expired")
    first = await tasks.decide(orgs.expert2, conflicting["id"], "only")
    assert first.status_code == 200, first.text

    ids = [
        f"{fine[0]['id']}/only",
        f"{expired['id']}/only",
        f"{conflicting['id']}/only",
        f"{foreign['id']}/only",
        f"{orgs.ns_a}/task-missing/only",
        f"{fine[1]['id']}/only",
    ]
    body = {"ids": ids, "action": "approve", "feedback": "batch ok"}
    headers = {**orgs.expert.headers, "Idempotency-Key": "batch-0001"}
    r = await client.post("/human-tasks/bulk-resume", json=body, headers=headers)
    assert r.status_code == 200, r.text
    out = r.json()
    assert [(i["id"], i["ok"], i["code"]) for i in out["results"]] == [
        (ids[0], True, None),
        (ids[1], False, "human_task_expired"),
        (ids[2], False, "run_state_conflict"),
        (ids[3], False, "not_found"),
        (ids[4], False, "not_found"),
        (ids[5], True, None),
    ]
    assert all(i["message"] for i in out["results"] if not i["ok"])
    assert (out["succeeded"], out["failed"]) == (2, 4)
    assert out["summary"] == "2 succeeded / 4 failed"
    assert out["failures"] == {
        "human_task_expired": [ids[1]],
        "run_state_conflict": [ids[2]],
        "not_found": [ids[3], ids[4]],
    }
    assert out["idempotency_key"] == "batch-0001"

    # exactly the fine ones were written, by the caller
    before = {
        task_id: raw_entry(cluster, task_id)
        for task_id in [fine[0]["id"], fine[1]["id"], expired["id"], conflicting["id"]]
    }
    for made in fine:
        decision = before[made["id"]]["decision"]
        assert (decision["by"], decision["feedback"]) == (orgs.expert.username, "batch ok")
    assert "decision" not in before[expired["id"]]
    assert before[conflicting["id"]]["decision"]["by"] == orgs.expert2.username
    assert "decision" not in raw_entry(cluster, foreign["id"])
    rows = await approvals(client, orgs)
    mine = [row for row in rows if row["actor"] == orgs.expert.username]
    assert sorted(row["target"] for row in mine) == sorted(
        f"agentictask:{made['id']}" for made in fine
    )

    # a replay answers the identical body and writes nothing
    again = await client.post("/human-tasks/bulk-resume", json=body, headers=headers)
    assert again.status_code == 200 and again.content == r.content
    # (the operator may have ticked the tasks meanwhile: only the platform's part counts)
    assert {task_id: platform_part(raw_entry(cluster, task_id)) for task_id in before} == {
        task_id: platform_part(entry) for task_id, entry in before.items()
    }
    assert len(await approvals(client, orgs)) == len(rows)
    batches = await client.get(
        "/audit", params={"action": "task.bulk_resume"}, headers=orgs.admin_a.headers
    )
    assert batches.status_code == 200
    # the same key with another body is refused
    other = await client.post(
        "/human-tasks/bulk-resume", json={**body, "ids": ids[:1]}, headers=headers
    )
    assert other.status_code == 422 and other.json()["code"] == "idempotency_conflict"
    # another caller's same key is its own batch
    r = await client.post(
        "/human-tasks/bulk-resume",
        json={**body, "ids": ids[:1]},
        headers={**orgs.expert2.headers, "Idempotency-Key": "batch-0001"},
    )
    assert r.status_code == 200 and r.json()["failures"] == {"run_state_conflict": ids[:1]}


async def test_bulk_reject_needs_feedback_and_tasks_decide(
    tasks: TaskApi, orgs: Orgs, client: httpx.AsyncClient, cluster: Cluster
) -> None:
    made = await tasks.create(orgs.requester, orgs.org_a, steps=[STEP])
    await tasks.until(orgs.expert, made["id"], ticked)
    ids = [f"{made['id']}/only"]
    r = await client.post(
        "/human-tasks/bulk-resume",
        json={"ids": ids, "action": "approve"},
        headers=orgs.viewer.headers,
    )
    assert r.status_code == 403 and r.json()["code"] == "forbidden"
    for bad in (
        {"ids": ids, "action": "reject"},
        {"ids": ids + ids, "action": "approve"},
        {"ids": [], "action": "approve"},
        {"ids": ["not-an-id"], "action": "approve"},
    ):
        r = await client.post("/human-tasks/bulk-resume", json=bad, headers=orgs.expert.headers)
        assert r.status_code == 422 and r.json()["code"] == "validation_failed", bad
    # the requester cannot approve its own task, in a batch either
    r = await client.post(
        "/human-tasks/bulk-resume",
        json={"ids": ids, "action": "approve"},
        headers=orgs.requester.headers,
    )
    assert r.json()["failures"] == {"self_approval_forbidden": ids}
    r = await client.post(
        "/human-tasks/bulk-resume",
        json={"ids": ids, "action": "reject", "feedback": "not this month"},
        headers=orgs.expert.headers,
    )
    assert r.status_code == 200 and r.json()["summary"] == "1 succeeded / 0 failed"
    assert raw_entry(cluster, made["id"])["decision"]["verdict"] == "reject"
    await tasks.until(orgs.expert, made["id"], lambda t: t["phase"] == "Rejected")
