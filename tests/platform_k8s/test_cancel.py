"""Cancelling a task: the platform records the request, the operator moves the task to
Cancelled, nothing can be decided after; only `run.control` in the task's org may ask."""

from __future__ import annotations

import httpx

from tests.platform_k8s.conftest import Orgs, TaskApi


async def test_cancel_stops_the_task_for_good(
    client: httpx.AsyncClient, tasks: TaskApi, orgs: Orgs
) -> None:
    task = await tasks.create(orgs.requester, orgs.org_a)
    url = f"/agentic/tasks/{task['id']}/cancel"
    viewer = await client.post(url, headers=orgs.viewer.headers)
    assert viewer.status_code == 403 and viewer.json()["code"] == "forbidden"
    other_org = await client.post(url, headers=orgs.admin_b.headers)
    assert other_org.status_code == 404
    assert (await tasks.get(orgs.expert, task["id"])).json()["status"].get("phase") != "Cancelled"

    asked = await client.post(url, headers=orgs.requester.headers)
    assert asked.status_code == 202, asked.text
    assert asked.json()["requestedBy"] == orgs.requester.username
    cancelled = await tasks.until(
        orgs.expert, task["id"], lambda t: t["status"].get("phase") == "Cancelled"
    )
    assert cancelled["status"].get("completedAt")
    late = await tasks.decide(orgs.expert, task["id"], "read")
    assert late.status_code == 409 and late.json()["code"] == "run_state_conflict"
    again = await client.post(url, headers=orgs.requester.headers)
    assert again.status_code == 409 and again.json()["code"] == "run_state_conflict"
    audit = await client.get(
        "/audit", params={"action": "task.cancel_requested"}, headers=orgs.admin_a.headers
    )
    assert [r["target"] for r in audit.json()["items"]] == [f"task:{task['id']}"]
