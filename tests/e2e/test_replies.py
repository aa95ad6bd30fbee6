"""Draft replies and learning from experts end to end (issue 14, items 1, 4 and 5): the
platform API, the operator and the org's agent as processes, the agent's offline
responder.

A client writes; the platform asks the agent for a draft with a signed command; the
holding reply's low confidence puts it in the review queue (kind `reply`); an expert's
edit is sent to the conversation and becomes a correction of the org, pushed to the
agent; the next draft for a similar message is the corrected one, confident enough to be
sent at once; and a new replica with an empty state folder drafts the same, because the
platform sends the org's corrections with every chat command.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from humanwork_core import signing
from humanwork_dev.processes import AgentProcess
from tests.e2e.conftest import World

FIRST = "Where is my order 1042? It has not arrived yet. Jane, jane@example.com"
LATER = "Where is my order 1042? It has still not arrived yet. Jane, jane@example.com"
EDITED = "Order 1042 left our warehouse yesterday and will arrive on Friday."


async def _conversation(world: World, text: str) -> str:
    base = world.platform.url
    r = await world.http.post(
        f"{base}/orgs/{world.org_id}/conversations",
        json={"subject": "Order 1042"},
        headers=world.admin,
    )
    assert r.status_code == 201, r.text
    cid = str(r.json()["id"])
    r = await world.http.post(
        f"{base}/conversations/{cid}/messages",
        json={"role": "customer", "author": "jane@example.com", "content": text},
        headers=world.admin,
    )
    assert r.status_code == 201, r.text
    return cid


async def _draft(world: World, cid: str, **headers: str) -> httpx.Response:
    return await world.http.post(
        f"{world.platform.url}/orgs/{world.org_id}/conversations/{cid}/replies",
        json={"agent": "agent"},
        headers={**world.requester, **headers},
    )


async def _viewer(world: World) -> dict[str, str]:
    """A viewer of the org, signed in: its authorization header."""
    return (await world.add_user("viewer", "viewer"))[2]


async def _thread(world: World, reply_id: str) -> dict[str, Any]:
    r = await world.http.get(
        f"{world.platform.url}/human-tasks/replies/{reply_id}", headers=world.expert
    )
    assert r.status_code == 200, r.text
    detail: dict[str, Any] = r.json()
    return detail


async def _queue(world: World) -> list[dict[str, Any]]:
    r = await world.http.get(
        f"{world.platform.url}/human-tasks",
        params={"org_id": world.org_id, "limit": 500},
        headers=world.expert,
    )
    assert r.status_code == 200, r.text
    items: list[dict[str, Any]] = r.json()["items"]
    assert r.json()["total"] == len(items)
    return items


async def _allow_auto_send(world: World) -> None:
    """The org's admin rule under which a confident, low or medium risk draft is sent
    without review (without a rule every draft is reviewed)."""
    engine = create_async_engine(world.platform.env["HUMANWORK_DATABASE_URL"])
    try:
        async with engine.begin() as conn:
            await conn.execute(
                text("UPDATE orgs SET reply_auto_send = :rule WHERE id = :org"),
                {
                    "rule": json.dumps({"max_risk": "medium", "min_confidence": 0.7}),
                    "org": uuid.UUID(world.org_id),
                },
            )
    finally:
        await engine.dispose()


async def _agent_corrections(agent: AgentProcess) -> int:
    async with httpx.AsyncClient() as http:
        r = await http.get(f"{agent.url}/v1/status")
    assert r.status_code == 200, r.text
    return int(r.json()["corrections"])


async def test_a_low_confidence_draft_is_reviewed_and_the_edit_teaches_the_agent(
    world: World,
) -> None:
    base = world.platform.url
    await _allow_auto_send(world)
    cid = await _conversation(world, FIRST)

    # the agent's holding reply (confidence 0.3 < the threshold 70) waits for an expert
    r = await _draft(world, cid)
    assert r.status_code == 201, r.text
    draft = r.json()
    assert draft["state"] == "pending" and draft["confidence"] < 0.7, draft
    assert draft["threshold"] == 0.7 and draft["sent_message_id"] is None
    item = next(i for i in await _queue(world) if i["id"] == f"replies/{draft['id']}")
    assert item["kind"] == "reply" and item["task_id"] == f"conversations/{cid}"
    assert item["step_description"] == draft["draft"][:300]
    detail = await _thread(world, draft["id"])
    assert detail["client_message"] == FIRST.replace("jane@example.com", "[email]")
    assert [m["role"] for m in detail["conversation"]["messages"]] == ["customer"]

    # an expert edits it: the edited text is sent as the agent's message
    r = await world.http.post(
        f"{base}/human-tasks/replies/{draft['id']}/resume",
        json={"action": "edit", "text": EDITED},
        headers=world.expert,
    )
    assert r.status_code == 200, r.text
    sent = r.json()
    assert sent["state"] == "sent" and sent["sent_text"] == EDITED
    messages = (await _thread(world, draft["id"]))["conversation"]["messages"]
    assert [(m["role"], m["content"]) for m in messages][-1] == ("agent", EDITED)
    assert all(i["id"] != f"replies/{draft['id']}" for i in await _queue(world))
    again = await world.http.post(
        f"{base}/human-tasks/replies/{draft['id']}/resume",
        json={"action": "approve"},
        headers=world.expert,
    )
    assert again.status_code == 409 and again.json()["code"] == "run_state_conflict"

    # the edit is a correction of the org, and it reached the agent
    r = await world.http.get(f"{base}/orgs/{world.org_id}/corrections", headers=world.expert)
    assert r.status_code == 200, r.text
    (correction,) = r.json()["items"]
    assert correction["kind"] == "reply_edit" and correction["corrected"] == EDITED
    assert correction["draft"] == draft["draft"] and correction["message"] == FIRST
    assert await _agent_corrections(world.agent) == 1

    # the next draft for a similar message is the corrected reply, confident: sent at once
    later = await _conversation(world, LATER)
    r = await _draft(world, later)
    assert r.status_code == 201, r.text
    second = r.json()
    assert second["draft"] == EDITED and second["confidence"] >= 0.7, second
    assert second["state"] == "sent" and second["sent_text"] == EDITED
    assert all(i["id"] != f"replies/{second['id']}" for i in await _queue(world))

    # audit: the chat (redacted), the sends, the expert's edit, the correction
    drafted = [
        r for r in await world.audit("reply.drafted") if r["details"]["reply"] == draft["id"]
    ]
    assert len(drafted) == 1
    assert "jane@example.com" not in json.dumps(drafted[0])
    assert drafted[0]["details"]["request"]["message"].endswith("[email]")
    assert drafted[0]["details"]["response"]["confidence"] == draft["confidence"]
    sends = {r["details"]["reply"]: r for r in await world.audit("reply.sent")}
    assert sends[draft["id"]]["actor"].startswith("expert-")
    assert sends[second["id"]]["actor"] == f"agent:{world.namespace}/agent"
    # this org's rows (the session's platform serves other tests' orgs too)
    for action in ("reply.edit", "correction.recorded"):
        rows = [r for r in await world.audit(action) if r["org_id"] == world.org_id]
        assert len(rows) == 1, (action, rows)


async def test_a_new_replica_without_the_corrections_still_uses_them(world: World) -> None:
    base = world.platform.url
    await _allow_auto_send(world)
    cid = await _conversation(world, FIRST)
    draft = (await _draft(world, cid)).json()
    r = await world.http.post(
        f"{base}/human-tasks/replies/{draft['id']}/resume",
        json={"action": "edit", "text": EDITED},
        headers=world.expert,
    )
    assert r.status_code == 200, r.text

    # a new replica: an empty state folder, so no corrections of its own
    world.agent.stop()
    replica = AgentProcess(
        world.cluster.kubeconfig, world.namespace, "agent", world.workdir / "replica", base
    )
    replica.start()
    try:
        endpoints = world.platform.workdir / "agent-endpoints.json"
        known = json.loads(endpoints.read_text())
        endpoints.write_text(json.dumps({**known, f"{world.namespace}/agent": replica.url}))
        assert await _agent_corrections(replica) == 0
        later = await _conversation(world, LATER)
        r = await _draft(world, later)
        assert r.status_code == 201, r.text
        assert r.json()["draft"] == EDITED and r.json()["state"] == "sent"
        assert await _agent_corrections(replica) == 1
    finally:
        replica.stop()
        world.agent.start()


async def test_a_streamed_draft_and_a_rejection(world: World) -> None:
    base = world.platform.url
    cid = await _conversation(world, "Can you tell me more about your return policy?")
    events: list[tuple[str, Any]] = []
    async with world.http.stream(
        "POST",
        f"{base}/orgs/{world.org_id}/conversations/{cid}/replies",
        json={"agent": "agent"},
        headers={**world.requester, "Accept": "text/event-stream"},
    ) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        event = ""
        async for line in r.aiter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                events.append((event, json.loads(line[5:])))
    kinds = [e for e, _ in events]
    assert kinds.count("token") >= 2 and kinds[-2:] == ["done", "decision"], kinds
    text = "".join(d["text"] for e, d in events if e == "token")
    decision = events[-1][1]
    assert decision["draft"] == events[-2][1]["reply"] and text.strip() == decision["draft"]
    assert decision["state"] == "pending"

    r = await world.http.post(
        f"{base}/human-tasks/replies/{decision['id']}/resume",
        json={"action": "reject", "feedback": "Link the returns page."},
        headers=world.expert,
    )
    assert r.status_code == 200 and r.json()["state"] == "rejected", r.text
    messages = (await _thread(world, decision["id"]))["conversation"]["messages"]
    assert [m["role"] for m in messages] == ["customer"]  # nothing was sent
    r = await world.http.get(f"{base}/orgs/{world.org_id}/corrections", headers=world.expert)
    (correction,) = r.json()["items"]
    assert correction["kind"] == "reply_rejected"
    assert correction["corrected"] == "Link the returns page."


async def test_drafting_is_refused_where_it_must_be(world: World) -> None:
    base = world.platform.url
    cid = await _conversation(world, FIRST)
    # the agent's chat answers only the platform's signed command
    body = json.dumps({"message": "hello"}).encode()
    unsigned = await world.http.post(f"{world.agent.url}/v1/chat", content=body)
    assert unsigned.status_code == 401 and unsigned.json()["code"] == "signature_missing"
    forged = await world.http.post(
        f"{world.agent.url}/v1/chat",
        content=body,
        headers={signing.SIGNATURE_HEADER: signing.sign("not-the-secret", body, datetime.now(UTC))},
    )
    assert forged.status_code == 401 and forged.json()["code"] == "signature_mismatch"

    # a viewer of the org (tasks.read, not run.control) may neither ask for drafts nor send
    viewer = await _viewer(world)
    r = await _draft(world, cid)
    pending = r.json()
    assert (await _draft(world, cid, **viewer)).status_code == 403
    r = await world.http.post(
        f"{base}/human-tasks/replies/{pending['id']}/resume",
        json={"action": "approve"},
        headers=viewer,
    )
    assert r.status_code == 403
    # no such agent, conversation, or a conversation with no client message
    r = await world.http.post(
        f"{base}/orgs/{world.org_id}/conversations/{cid}/replies",
        json={"agent": "nobody"},
        headers=world.requester,
    )
    assert r.status_code == 404
    r = await world.http.post(
        f"{base}/orgs/{world.org_id}/conversations/00000000-0000-4000-8000-000000000000/replies",
        json={"agent": "agent"},
        headers=world.requester,
    )
    assert r.status_code == 404
    r = await world.http.post(
        f"{base}/orgs/{world.org_id}/conversations", json={"subject": "x"}, headers=world.admin
    )
    empty = r.json()["id"]
    r = await _draft(world, empty)
    assert r.status_code == 422 and r.json()["details"]["reason"] == "no_client_message"
    # an edit needs its text
    r = await world.http.post(
        f"{base}/human-tasks/replies/{pending['id']}/resume",
        json={"action": "edit"},
        headers=world.expert,
    )
    assert r.status_code == 422 and r.json()["code"] == "validation_failed"


async def test_a_steps_edit_and_rejection_are_corrections_pushed_to_the_agent(
    world: World,
) -> None:
    base = world.platform.url
    rejected = await world.plan()
    first = rejected["steps"][0]
    r = await world.resume(rejected["name"], first["id"], action="reject", feedback="September")
    assert r.status_code == 200, r.text
    edited = await world.plan("Reconcile all Amazon orders for September")
    step = edited["steps"][0]
    amended = {**step["parameters"], "maxResults": 50}
    r = await world.resume(edited["name"], step["id"], action="edit", parameters=amended)
    assert r.status_code == 200, r.text

    r = await world.http.get(f"{base}/orgs/{world.org_id}/corrections", headers=world.expert)
    assert r.status_code == 200, r.text
    by_kind = {c["kind"]: c for c in r.json()["items"]}
    assert set(by_kind) == {"step_rejected", "step_edit"}
    assert by_kind["step_rejected"]["corrected"] == "September"
    assert by_kind["step_rejected"]["source"] == (
        f"step:{world.namespace}/{rejected['name']}/{first['id']}"
    )
    assert json.loads(by_kind["step_edit"]["corrected"]) == amended
    assert json.loads(by_kind["step_edit"]["draft"]) == step["parameters"]
    # pushed to the agent in the background, once each
    for _ in range(50):
        if await _agent_corrections(world.agent) == 2:
            break
        await asyncio.sleep(0.2)
    assert await _agent_corrections(world.agent) == 2


async def test_an_experts_step_edit_changes_the_next_plan_for_a_similar_request(
    world: World,
) -> None:
    """Plans learn too: the plan command carries the org's corrections, and a plan that
    proposes what an expert corrected for a similar request takes the expert's version."""
    r = await world.ask_platform()
    assert r.status_code == 201, r.text
    first = r.json()
    step = first["steps"][0]
    amended = {**step["parameters"], "maxResults": 50}
    name = first["id"].split("/", 1)[1]
    r = await world.resume(name, step["id"], action="edit", parameters=amended)
    assert r.status_code == 200, r.text

    r = await world.ask_platform()
    assert r.status_code in (200, 201), r.text
    later = r.json()
    assert later["id"] != first["id"]
    learned = later["steps"][0]
    assert learned["parameters"] == amended
    assert learned["description"].endswith(
        "(parameters as an expert corrected them for a similar request)"
    )
    assert later["steps"][1]["parameters"] == first["steps"][1]["parameters"]
