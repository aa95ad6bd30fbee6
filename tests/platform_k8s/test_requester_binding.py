"""requester != approver fails closed: the platform binds a plan request to the person who
asked BEFORE it asks the agent, so an agent that fails, answers late or files its task
under another request's id cannot leave the asker free to approve their own request; a
revision keeps the original requester; a draft reply's requester cannot send it.

The agent is a taken-over fake (tests/platform_k8s/takeover.py) acting with the agent's
real ServiceAccount token against the real API server. Every refusal sits beside its
positive control: another expert of the org decides the same step.
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from platform_api.settings import Settings
from tests.platform.conftest import Caller, make_settings
from tests.platform_k8s.conftest import Orgs, TaskApi, until
from tests.platform_k8s.takeover import TakenOverAgent, agent

__all__ = ["agent"]  # fixture

AGENT_TIMEOUT = 2.0


@pytest.fixture
def settings(database_url: str, platform_kubeconfig: Path, endpoints_file: Path) -> Settings:
    # a short command timeout, so that an agent answering late is one the platform gave up on
    return make_settings(
        database_url,
        kubeconfig=str(platform_kubeconfig),
        agent_endpoints_file=endpoints_file,
        agent_timeout_seconds=AGENT_TIMEOUT,
    )


async def ask(client: httpx.AsyncClient, orgs: Orgs, caller: Caller) -> httpx.Response:
    return await client.post(
        f"/orgs/{orgs.org_a}/agents/agent/tasks",
        json={"request": "refund order 1042"},
        headers=caller.headers,
    )


async def approve(tasks: TaskApi, caller: Caller, orgs: Orgs, name: str) -> httpx.Response:
    return await tasks.decide(caller, f"{orgs.ns_a}/{name}", "read")


async def refused_then_decided(tasks: TaskApi, orgs: Orgs, name: str) -> None:
    """The requester cannot approve the task's first step; another expert can."""
    own = await approve(tasks, orgs.requester, orgs, name)
    assert own.status_code == 403, own.text
    assert own.json()["code"] == "self_approval_forbidden"
    task = (await tasks.get(orgs.expert, f"{orgs.ns_a}/{name}")).json()
    assert not any(s.get("decision") for s in task["status"].get("steps") or [])
    other = await approve(tasks, orgs.expert, orgs, name)
    assert other.status_code == 200, other.text


async def test_an_agent_that_fails_after_filing_its_task_leaves_the_asker_bound(
    client: httpx.AsyncClient, tasks: TaskApi, orgs: Orgs, agent: TakenOverAgent
) -> None:
    agent.keep_plan_request, agent.plan_status = True, 500
    r = await ask(client, orgs, orgs.requester)
    assert r.status_code == 502 and r.json()["code"] == "agent_refused", r.text
    await refused_then_decided(tasks, orgs, agent.created[-1])


async def test_an_agent_that_answers_late_leaves_the_asker_bound(
    client: httpx.AsyncClient, tasks: TaskApi, orgs: Orgs, agent: TakenOverAgent
) -> None:
    agent.keep_plan_request, agent.late = True, threading.Event()
    try:
        r = await ask(client, orgs, orgs.requester)
        assert r.status_code == 502 and r.json()["code"] == "agent_unreachable", r.text
    finally:
        agent.late.set()  # it answers now, to a platform that gave up
    await refused_then_decided(tasks, orgs, agent.created[-1])


async def test_a_task_filed_under_another_requests_id_after_an_error_binds_both(
    client: httpx.AsyncClient, tasks: TaskApi, orgs: Orgs, agent: TakenOverAgent
) -> None:
    # another expert's request, answered properly: its task is bound to them
    agent.keep_plan_request = True
    r = await ask(client, orgs, orgs.expert2)
    assert r.status_code == 201, r.text
    theirs = agent.commands[-1]["planRequest"]
    # the asker's request: the agent files its task under the other expert's id, then fails
    agent.plan_request, agent.plan_status = theirs, 500
    r = await ask(client, orgs, orgs.requester)
    assert r.status_code == 502, r.text
    await refused_then_decided(tasks, orgs, agent.created[-1])


async def test_a_revision_keeps_the_requester_bound_before_the_agent_failed(
    client: httpx.AsyncClient, tasks: TaskApi, orgs: Orgs, agent: TakenOverAgent
) -> None:
    agent.keep_plan_request, agent.plan_status = True, 500
    assert (await ask(client, orgs, orgs.requester)).status_code == 502
    first = agent.created[-1]
    agent.plan_status = 201  # the revision is answered properly
    rejected = await tasks.decide(
        orgs.expert, f"{orgs.ns_a}/{first}", "read", "reject", {"feedback": "only October"}
    )
    assert rejected.status_code == 200, rejected.text

    def revised(commands: list[dict[str, Any]]) -> bool:
        return any(c.get("revises") == first for c in commands) and len(agent.created) > 1

    await until(lambda: _commands(agent), revised, within=60)
    revision = agent.created[-1]
    task = await tasks.until(
        orgs.expert,
        f"{orgs.ns_a}/{revision}",
        lambda t: t["requested_by"] != "agent:agent",
        within=30,
    )
    assert task["requested_by"] == orgs.requester.username
    await refused_then_decided(tasks, orgs, revision)


async def _commands(agent: TakenOverAgent) -> list[dict[str, Any]]:
    return list(agent.commands)


async def pending_draft(client: httpx.AsyncClient, orgs: Orgs) -> dict[str, Any]:
    """A client message, and a draft the requester asked for, held for review."""
    r = await client.post(
        f"/orgs/{orgs.org_a}/conversations",
        json={"subject": "Refund"},
        headers=orgs.admin_a.headers,
    )
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    r = await client.post(
        f"/conversations/{cid}/messages",
        json={"role": "customer", "author": "jane@example.com", "content": "Refund me."},
        headers=orgs.admin_a.headers,
    )
    assert r.status_code == 201, r.text
    r = await client.post(
        f"/orgs/{orgs.org_a}/conversations/{cid}/replies",
        json={"agent": "agent"},
        headers=orgs.requester.headers,
    )
    assert r.status_code == 201, r.text
    made: dict[str, Any] = r.json()
    assert made["state"] == "pending" and made["requested_by"] == orgs.requester.username
    return made


async def test_the_requester_of_a_draft_cannot_send_it(
    client: httpx.AsyncClient, orgs: Orgs, agent: TakenOverAgent
) -> None:
    agent.chat_answer = {**agent.chat_answer, "flag_for_review": True}
    draft = await pending_draft(client, orgs)
    url = f"/human-tasks/replies/{draft['id']}/resume"
    for body in ({"action": "approve"}, {"action": "edit", "text": "Refunded: 4,000 EUR."}):
        own = await client.post(url, json=body, headers=orgs.requester.headers)
        assert own.status_code == 403, own.text
        assert own.json()["code"] == "self_approval_forbidden"
    r = await client.get(f"/human-tasks/replies/{draft['id']}", headers=orgs.expert.headers)
    assert r.json()["state"] == "pending" and not r.json()["sent_text"]
    other = await client.post(url, json={"action": "approve"}, headers=orgs.expert.headers)
    assert other.status_code == 200, other.text
    assert other.json()["state"] == "sent" and other.json()["decided_by"] == orgs.expert.username


async def test_an_idempotent_retry_after_a_failure_stays_bound_once(
    client: httpx.AsyncClient, tasks: TaskApi, orgs: Orgs, agent: TakenOverAgent
) -> None:
    """A retry with the same Idempotency-Key names the same request: the binding made
    before the failed attempt stands, and the retry that succeeds vouches for the asker."""
    key = f"k-{uuid.uuid4().hex[:8]}"
    headers = {**orgs.requester.headers, "Idempotency-Key": key}
    url = f"/orgs/{orgs.org_a}/agents/agent/tasks"
    agent.keep_plan_request, agent.plan_status = True, 500
    failed = await client.post(url, json={"request": "refund"}, headers=headers)
    assert failed.status_code == 502, failed.text
    agent.plan_status = 201
    retried = await client.post(url, json={"request": "refund"}, headers=headers)
    assert retried.status_code == 201, retried.text
    assert agent.commands[-1]["planRequest"] == agent.commands[-2]["planRequest"]
    await refused_then_decided(tasks, orgs, agent.created[-2])
    await refused_then_decided(tasks, orgs, retried.json()["id"].split("/")[1])
