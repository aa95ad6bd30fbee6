"""The initiating client's confirmation of a high-stakes step, through the API on the real
control plane with the operator running, from the attacker's side: an expert, an admin,
another client of the org and a client of another org cannot confirm or decline for the
client (403 / 404, nothing written); a confirmation replayed after an expert's edit is
refused (409 `confirmation_stale`); each beside the initiating client's own request, which
goes through (audited). The step waits for the client after the experts approved it (the
task's condition `WaitingForClient`, the queue's `waiting_for_client`); a decline halts the
task like a rejection.

The task is one the platform bound to the client (annotation `humanwork.io/requester`, as
the platform writes it when a client's message becomes a plan) and for which it recorded
the confirmations needed (the planner's `confirmations_of`, as when it binds a plan).
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from fastapi import FastAPI

from humanwork_core import taskflow
from humanwork_core.requester import REQUESTER_ANNOTATION
from humanwork_core.resources import AgenticTask
from platform_api.agents.planning import PLANNER
from platform_api.kube.client import KubeClient
from platform_api.state import KUBE
from tests.platform.conftest import Api, Caller
from tests.platform_k8s.conftest import Orgs, TaskApi

READ = "read"


def _kube(app: FastAPI) -> KubeClient:
    kube = KUBE.of(app.state)
    assert kube is not None
    return kube


async def _client_task(app: FastAPI, tasks: TaskApi, orgs: Orgs, client: Caller) -> str:
    """A task the platform bound to `client`, with its confirmations recorded."""
    made = await tasks.create(orgs.requester, orgs.org_a)
    namespace, name = made["id"].split("/")
    kube, planner = _kube(app), PLANNER.of(app.state)
    assert planner.confirmations_of is not None
    await kube.annotate_task(namespace, name, {REQUESTER_ANNOTATION: client.username})
    async with planner.sessions() as session:
        written = await planner.confirmations_of(
            session, kube, uuid.UUID(orgs.org_a), namespace, name
        )
        await session.commit()
    assert written
    return str(made["id"])


async def _task(app: FastAPI, task_id: str) -> AgenticTask:
    namespace, name = task_id.split("/")
    kube = _kube(app)
    return AgenticTask.from_wire(await kube.get_task(namespace, name))


async def _shown_hash(app: FastAPI, task_id: str, step_id: str = READ) -> str:
    task = await _task(app, task_id)
    step = task.step(step_id)
    assert step is not None
    return taskflow.confirmation_hash(step, task.current_status().step(step_id))


async def _confirmation(app: FastAPI, task_id: str, step_id: str = READ) -> dict[str, Any]:
    entry = (await _task(app, task_id)).current_status().step(step_id)
    assert entry.confirmation is not None
    return entry.confirmation.to_wire()


def _url(orgs: Orgs, task_id: str, verb: str, org_id: str | None = None) -> str:
    name = task_id.split("/")[1]
    return f"/orgs/{org_id or orgs.org_a}/tasks/{name}/steps/{READ}/{verb}"


def _step(task: dict[str, Any], step_id: str) -> dict[str, Any]:
    return next((s for s in task["status"].get("steps") or [] if s["id"] == step_id), {})


async def _clients(api: Api, orgs: Orgs) -> tuple[Caller, Caller, Caller]:
    root = await api.admin()
    suffix = uuid.uuid4().hex[:6]
    return (
        await api.user(root, f"client-{suffix}", "client", [orgs.org_a]),
        await api.user(root, f"client2-{suffix}", "client", [orgs.org_a]),
        await api.user(root, f"client-b-{suffix}", "client", [orgs.org_b]),
    )


async def test_only_the_initiating_client_confirms_its_step(
    app: FastAPI, client: httpx.AsyncClient, api: Api, tasks: TaskApi, orgs: Orgs
) -> None:
    mine, other, foreign = await _clients(api, orgs)
    task_id = await _client_task(app, tasks, orgs, mine)
    approved = await tasks.decide(orgs.expert, task_id, READ)
    assert approved.status_code == 200, approved.text
    task = await tasks.until(
        orgs.expert, task_id, lambda t: _step(t, READ).get("state") == "AwaitingClient"
    )
    assert task["status"]["phase"] == "PendingApproval"
    queue = await client.get("/human-tasks", headers=orgs.expert.headers)
    item = next(i for i in queue.json()["items"] if i["id"] == f"{task_id}/{READ}")
    assert item["status"] == "waiting_for_client"

    body = {"step_hash": await _shown_hash(app, task_id)}
    for caller, status, code in (
        (orgs.expert, 403, "forbidden"),  # the expert who could approve: no steps.confirm
        (orgs.admin_a, 403, "forbidden"),
        (other, 404, "not_found"),  # another client of the org, who cannot see the task
        (foreign, 404, "not_found"),  # a client of another org
    ):
        r = await client.post(_url(orgs, task_id, "confirm"), json=body, headers=caller.headers)
        assert (r.status_code, r.json()["code"]) == (status, code), (caller.username, r.text)
    r = await client.post(
        _url(orgs, task_id, "confirm", orgs.org_b), json=body, headers=foreign.headers
    )
    assert r.status_code == 404  # nor through its own org
    assert await _confirmation(app, task_id) == {"required": True, "state": "waiting"}
    refused = await client.post(
        _url(orgs, task_id, "confirm"), json={"step_hash": "0" * 64}, headers=mine.headers
    )
    assert refused.status_code == 409 and refused.json()["code"] == "confirmation_stale"

    r = await client.post(_url(orgs, task_id, "confirm"), json=body, headers=mine.headers)
    assert r.status_code == 200, r.text
    shown = r.json()["steps"][0]
    assert shown["confirmation"]["state"] == "confirmed"
    assert shown["confirmation"]["by"] == mine.username and shown["decision"] == "approved"
    again = await client.post(_url(orgs, task_id, "confirm"), json=body, headers=mine.headers)
    assert (
        again.status_code == 200
        and again.json()["steps"][0]["confirmation"]["at"] == (shown["confirmation"]["at"])
    )
    await tasks.until(orgs.expert, task_id, lambda t: _step(t, READ).get("state") == "Approved")
    audit = await client.get(
        "/audit", params={"org": orgs.org_a, "action": "step.confirm"}, headers=orgs.admin_a.headers
    )
    rows = [row for row in audit.json()["items"] if row["target"].endswith(task_id)]
    assert len(rows) == 1 and rows[0]["actor"] == mine.username


async def test_an_experts_edit_voids_the_confirmation_and_its_replay_is_refused(
    app: FastAPI, client: httpx.AsyncClient, api: Api, tasks: TaskApi, orgs: Orgs
) -> None:
    mine, _other, _foreign = await _clients(api, orgs)
    task_id = await _client_task(app, tasks, orgs, mine)
    seen = {"step_hash": await _shown_hash(app, task_id)}
    first = await client.post(_url(orgs, task_id, "confirm"), json=seen, headers=mine.headers)
    assert first.status_code == 200, first.text  # confirmed before any expert looked
    edited = await client.post(
        f"/human-tasks/{task_id}/{READ}/resume",
        json={"action": "edit", "parameters": {"month": "2026-09"}},
        headers=orgs.expert.headers,
    )
    assert edited.status_code == 200, edited.text
    await tasks.until(
        orgs.expert, task_id, lambda t: _step(t, READ).get("state") == "AwaitingClient"
    )
    replay = await client.post(_url(orgs, task_id, "confirm"), json=seen, headers=mine.headers)
    assert replay.status_code == 409 and replay.json()["code"] == "confirmation_stale"
    assert (await _confirmation(app, task_id))["stepHash"] == seen["step_hash"]  # unchanged

    fresh = {"step_hash": await _shown_hash(app, task_id)}
    assert fresh != seen
    r = await client.post(_url(orgs, task_id, "confirm"), json=fresh, headers=mine.headers)
    assert r.status_code == 200, r.text
    step = r.json()["steps"][0]
    assert step["confirmation"]["state"] == "confirmed" and "2026-09" in step["summary"]
    await tasks.until(orgs.expert, task_id, lambda t: _step(t, READ).get("state") == "Approved")


async def test_a_decline_halts_the_task_like_a_rejection(
    app: FastAPI, client: httpx.AsyncClient, api: Api, tasks: TaskApi, orgs: Orgs
) -> None:
    mine, other, _foreign = await _clients(api, orgs)
    task_id = await _client_task(app, tasks, orgs, mine)
    url = _url(orgs, task_id, "decline")
    r = await client.post(url, json={}, headers=mine.headers)
    assert r.status_code == 422 and r.json()["code"] == "validation_failed"
    r = await client.post(url, json={"reason": "not me"}, headers=other.headers)
    assert r.status_code == 404
    r = await client.post(url, json={"reason": "no"}, headers=orgs.expert.headers)
    assert r.status_code == 403
    assert await _confirmation(app, task_id) == {"required": True, "state": "waiting"}

    r = await client.post(url, json={"reason": "wrong month"}, headers=mine.headers)
    assert r.status_code == 200, r.text
    assert r.json()["steps"][0]["confirmation"]["state"] == "declined"
    assert r.json()["phase"] == "Rejected"
    await tasks.until(orgs.expert, task_id, lambda t: t["status"].get("phase") == "Rejected")
    late = await tasks.decide(orgs.expert, task_id, READ)
    assert late.status_code == 409, late.text
    audit = await client.get(
        "/audit", params={"org": orgs.org_a, "action": "step.decline"}, headers=orgs.admin_a.headers
    )
    rows = [row for row in audit.json()["items"] if row["target"].endswith(task_id)]
    assert len(rows) == 1 and rows[0]["details"]["reason"] == "wrong month"
