"""The requester of a planned task is the one the platform vouches for, whatever a
compromised agent answers (issue 12, item 3).

The agent here is a fake that has been taken over (tests/platform_k8s/takeover.py).
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from tests.platform.conftest import Api
from tests.platform_k8s.conftest import Orgs
from tests.platform_k8s.takeover import TakenOverAgent, agent, settings

__all__ = ["agent", "settings"]  # fixtures


async def ask(client: httpx.AsyncClient, orgs: Orgs, key: str | None = None) -> dict[str, Any]:
    headers = dict(orgs.requester.headers)
    if key:
        headers["Idempotency-Key"] = key
    r = await client.post(
        f"/orgs/{orgs.org_a}/agents/agent/tasks", json={"request": "anything"}, headers=headers
    )
    assert r.status_code == 201, r.text
    planned: dict[str, Any] = r.json()
    return planned


async def requested_by(client: httpx.AsyncClient, orgs: Orgs, task_id: str) -> str:
    r = await client.get(f"/agentic/tasks/{task_id}", headers=orgs.expert.headers)
    assert r.status_code == 200, r.text
    return str(r.json()["requested_by"])


async def bound(client: httpx.AsyncClient, api: Api, task_id: str) -> bool:
    root = await api.admin()
    r = await client.get(
        "/audit", params={"action": "task.plan_requested", "limit": 500}, headers=root.headers
    )
    assert r.status_code == 200, r.text
    found = [i for i in r.json()["items"] if i["target"] == f"task:{task_id}"]
    assert len(found) == 1
    return bool(found[0]["details"]["requesterBound"])


async def test_a_task_without_the_plan_requests_id_is_requested_by_the_agent(
    client: httpx.AsyncClient, orgs: Orgs, api: Api, agent: TakenOverAgent
) -> None:
    planned = await ask(client, orgs)
    assert agent.commands[-1]["planRequest"]  # the platform sent an id ...
    # ... which the agent left off: the platform vouches for nobody
    assert await requested_by(client, orgs, planned["id"]) == "agent:agent"
    assert not await bound(client, api, planned["id"])
    # and yet the person who asked cannot approve the plan they asked for
    url = f"/agentic/tasks/{planned['id']}/steps/read/approve"
    own = await client.post(url, json={}, headers=orgs.requester.headers)
    assert own.status_code == 403 and own.json()["code"] == "self_approval_forbidden"
    other = await client.post(url, json={}, headers=orgs.expert.headers)
    assert other.status_code == 200, other.text


async def test_an_agent_cannot_pin_a_request_on_a_task_made_for_another(
    client: httpx.AsyncClient, orgs: Orgs, api: Api, agent: TakenOverAgent
) -> None:
    agent.keep_plan_request = True
    first = await ask(client, orgs, key=f"k-{uuid.uuid4().hex[:6]}")
    assert await requested_by(client, orgs, first["id"]) == orgs.requester.username
    assert await bound(client, api, first["id"])

    # a second request (another id); the agent answers with an earlier task of its own,
    # made on its own: it stays the agent's
    agent.keep_plan_request = False
    loose = await ask(client, orgs)
    agent.keep_plan_request = True
    agent.answer_with = loose["id"].split("/")[1]
    again = await ask(client, orgs)
    assert again["id"] == loose["id"]
    assert await requested_by(client, orgs, loose["id"]) == "agent:agent"
    # and the first, bound task keeps its requester whatever the agent answers next
    agent.answer_with = first["id"].split("/")[1]
    await ask(client, orgs)
    assert await requested_by(client, orgs, first["id"]) == orgs.requester.username
