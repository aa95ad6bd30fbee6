"""A client's message dispatches itself, once: the dispatcher of the platform (its
background loop, on PostgreSQL) claims each client message, asks the org's agent
(`tests.platform.dispatch_support.FakeAgents`, behind the dispatcher's port), and keeps
the draft under the review rules, files the plan bound to the client, or records the
failure where the conversation and the experts see it."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from platform_api.dispatch.service import FAILED_TEXT, PLAN_TEXT
from platform_api.errors import AgentRefused, AgentUnreachable
from platform_api.settings import Settings
from tests.platform.conftest import Api, Caller, TwoOrgs, make_settings
from tests.platform.dispatch_support import (
    ATTACK,
    SEED_REQUEST,
    FakeAgents,
    rows,
    until,
    use,
    user_id,
)


@pytest.fixture
def settings(database_url: str) -> Settings:
    return make_settings(
        database_url,
        dispatch_interval_seconds=0.05,
        dispatch_timeout_seconds=2,
        dispatch_lease_seconds=3,
    )


@pytest.fixture
async def agents(app: FastAPI) -> AsyncIterator[FakeAgents]:
    fake = FakeAgents()
    use(app, fake)
    yield fake


class Client:
    """A client of org A, signed in, and a conversation it started through its endpoint."""

    def __init__(
        self, http: httpx.AsyncClient, caller: Caller, org_id: str, uid: uuid.UUID, cid: str
    ) -> None:
        self.http, self.caller, self.org_id, self.uid = http, caller, org_id, uid
        self.cid = uuid.UUID(cid)
        self.username = caller.username

    async def says(self, db: AsyncEngine, content: str) -> int:
        """The client posts a message (`POST /orgs/{id}/conversations/{cid}/messages`)."""
        r = await self.http.post(
            f"/orgs/{self.org_id}/conversations/{self.cid}/messages",
            json={"content": content},
            headers=self.caller.headers,
        )
        assert r.status_code == 201, r.text
        return int(r.json()["id"])

    async def reads(self) -> list[dict[str, Any]]:
        """The conversation as the client reads it."""
        r = await self.http.get(
            f"/orgs/{self.org_id}/conversations/{self.cid}", headers=self.caller.headers
        )
        assert r.status_code == 200, r.text
        found: list[dict[str, Any]] = r.json()["messages"]
        return found


@pytest.fixture
async def client_a(
    api: Api, client: httpx.AsyncClient, two_orgs: TwoOrgs, db: AsyncEngine
) -> Client:
    made = await api.user(two_orgs.admin, "client-a", "client", [two_orgs.org_a])
    r = await client.post(
        f"/orgs/{two_orgs.org_a}/conversations",
        json={"subject": "Help"},
        headers=made.headers,
    )
    assert r.status_code == 201, r.text
    uid = await user_id(db, made.username)
    return Client(client, made, two_orgs.org_a, uid, r.json()["id"])


async def dispatched(db: AsyncEngine, message_id: int) -> dict[str, Any]:
    async def probe() -> list[dict[str, Any]]:
        return await rows(
            db, "SELECT * FROM message_dispatches WHERE message_id = :m", m=message_id
        )

    found = await until(probe, lambda r: bool(r) and r[0]["state"] != "claimed")
    return found[0]


async def messages(db: AsyncEngine, cid: uuid.UUID) -> list[dict[str, Any]]:
    return await rows(db, "SELECT * FROM messages WHERE conversation_id = :c ORDER BY id", c=cid)


async def test_a_domain_question_is_drafted_and_waits_for_an_expert(
    agents: FakeAgents, client_a: Client, db: AsyncEngine, two_orgs: TwoOrgs
) -> None:
    mid = await client_a.says(db, "Where is my order 1042?")
    found = await dispatched(db, mid)
    assert found["state"] == "drafted" and found["mode"] == "domain", found
    (draft,) = await rows(db, "SELECT * FROM reply_drafts WHERE message_id = :m", m=mid)
    assert draft["state"] == "pending" and draft["requested_by"] == "client-a"
    assert str(found["reply_id"]) == str(draft["id"])
    assert agents.count("/v1/chat") == 1 and agents.count("/v1/tasks") == 0
    # the expert's queue has it; nothing was said to the client yet
    assert [m["role"] for m in await messages(db, client_a.cid)] == ["customer"]


async def test_a_client_cannot_talk_a_draft_past_review(
    agents: FakeAgents, client_a: Client, db: AsyncEngine, two_orgs: TwoOrgs
) -> None:
    # the attacker: a message that tells the (obedient) model to claim certainty and low risk
    mid = await client_a.says(db, ATTACK)
    await dispatched(db, mid)
    (draft,) = await rows(db, "SELECT * FROM reply_drafts WHERE message_id = :m", m=mid)
    assert draft["confidence"] == 1.0 and draft["risk"] == "low", draft
    assert not draft["flag_for_review"]
    assert draft["state"] == "pending" and draft["sent_message_id"] is None
    assert "agent" not in {m["role"] for m in await messages(db, client_a.cid)}

    # the positive control: the org's admin allows auto-send of such drafts -> sent
    r = await client_a.http.put(
        f"/orgs/{two_orgs.org_a}/client-settings",
        json={"reply_auto_send": {"max_risk": "low", "min_confidence": 0.9}},
        headers=two_orgs.admin_a.headers,
    )
    assert r.status_code == 200, r.text
    again = await client_a.says(db, ATTACK)
    await dispatched(db, again)
    (sent,) = await rows(db, "SELECT * FROM reply_drafts WHERE message_id = :m", m=again)
    assert sent["state"] == "sent" and sent["sent_message_id"] is not None
    agent_says = [m for m in await client_a.reads() if m["author_kind"] == "agent"]
    assert [m["id"] for m in agent_says] == [sent["sent_message_id"]]


async def test_an_agentic_request_files_one_plan_bound_to_the_client(
    agents: FakeAgents, client_a: Client, db: AsyncEngine
) -> None:
    mid = await client_a.says(db, SEED_REQUEST)
    found = await dispatched(db, mid)
    assert found["state"] == "planned" and found["mode"] == "agentic", found
    (_, command, key) = next(c for c in agents.calls if c[0] == "/v1/tasks")
    assert command["requester"] == "client-a"
    assert command["conversationId"] == str(client_a.cid)
    assert key == f"message-{mid}" and found["task"] == agents.tasks[key]
    assert agents.bound == [(found["task"], command["planRequest"], "client-a")]
    (binding,) = await rows(db, "SELECT * FROM plan_bindings")
    assert binding["requester"] == "client-a" and binding["task"] == found["task"]
    (said,) = [m for m in await client_a.reads() if m["author_kind"] == "system"]
    assert said["content"] == PLAN_TEXT and not said["internal"]
    assert said["meta"] == {"event": "plan_waiting", "task": found["task"]}
    assert not await rows(db, "SELECT id FROM reply_drafts")


async def test_messages_not_from_a_client_are_not_dispatched(
    agents: FakeAgents, client_a: Client, db: AsyncEngine
) -> None:
    async with db.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO messages (conversation_id, role, author, content, created_at, "
                "internal) VALUES (:c, 'customer', 'jane@example.com', 'hi', now(), false)"
            ),
            {"c": client_a.cid},
        )
    # a client's message after it is dispatched: the one before it never is
    mid = await client_a.says(db, "Where is my order?")
    await dispatched(db, mid)
    assert [r["message_id"] for r in await rows(db, "SELECT * FROM message_dispatches")] == [mid]


@pytest.mark.parametrize(
    ("failure", "reason"),
    [
        (AgentUnreachable("the agent did not answer", reason="ConnectError"), "agent_unreachable"),
        (AgentRefused("the agent refused", agentStatus="500"), "agent_refused"),
        (None, "timeout"),
    ],
    ids=["stopped", "error-500", "too-slow"],
)
async def test_a_failing_agent_leaves_a_visible_state(
    agents: FakeAgents,
    client_a: Client,
    db: AsyncEngine,
    two_orgs: TwoOrgs,
    failure: Exception | None,
    reason: str,
) -> None:
    if failure is None:
        agents.hang_on = "/v1/chat"  # past the dispatch timeout (2 s here)
    else:
        agents.fail = failure  # type: ignore[assignment]
    mid = await client_a.says(db, "Where is my order?")
    found = await dispatched(db, mid)
    assert found["state"] == "failed" and found["error"].startswith(reason), found
    (said,) = [m for m in await client_a.reads() if m["author_kind"] == "system"]
    assert said["content"] == FAILED_TEXT
    assert said["meta"] == {"event": "dispatch_failed", "message": mid}
    (event,) = await rows(db, "SELECT * FROM notify_events WHERE event = 'dispatch_failed'")
    assert str(event["org_id"]) == two_orgs.org_a
    payload = event["payload"]
    assert payload["message_id"] == mid and payload["conversation_id"] == str(client_a.cid)
    assert not await rows(db, "SELECT id FROM reply_drafts")
