"""The client role from the attacker's side, on PostgreSQL and on SQLite: a client sees
its own conversations (all of its org's once the org shares them), their messages without
internal notes, and nothing else; it cannot read another org's, post where it takes no
part, forge who wrote a message, or reach any expert or admin surface. Each refusal has
its positive control beside it."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from humanwork_dev.postgres import PostgresServer
from platform_api.settings import Settings
from tests.platform.clients_support import World, backend_url, code, seeded_world, start
from tests.platform.conftest import Api


@pytest.fixture(params=["postgresql", "sqlite"])
async def database_url(
    request: pytest.FixtureRequest,
    postgres: PostgresServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[str]:
    async for url in backend_url(request, postgres, tmp_path, monkeypatch):
        yield url


@pytest.fixture
async def world(api: Api, app: FastAPI, settings: Settings) -> World:
    # no Kubernetes here: the dispatch of clients' messages (tests/platform/test_dispatch*)
    # would answer each of them "the agent did not answer"; these tests are the API's
    app.state.dispatcher.paused = True
    return await seeded_world(api, settings)


async def _rows(database_url: str, query: str, **params: object) -> list[tuple[object, ...]]:
    engine = create_async_engine(database_url)
    try:
        async with engine.connect() as connection:
            return [tuple(row) for row in await connection.execute(text(query), params)]
    finally:
        await engine.dispose()


async def test_an_org_admin_makes_a_member_a_client(
    api: Api, client: httpx.AsyncClient, world: World
) -> None:
    member = await api.user(world.root, "new-member", "viewer", [world.org_a])
    # another org's admin cannot reach org A's member
    r = await client.put(
        f"/orgs/{world.org_a}/members/new-member",
        json={"role": "client"},
        headers=world.admin_b.headers,
    )
    assert r.status_code == 404 and code(r) == "not_found"
    # the member's own org admin can (the role is org.grantable)
    r = await client.put(
        f"/orgs/{world.org_a}/members/new-member",
        json={"role": "client"},
        headers=world.admin_a.headers,
    )
    assert r.status_code == 200, r.text
    assert r.json()["role"] == "client"
    # the new client reads conversations now, and no longer the queue it read as a viewer
    r = await client.get(f"/orgs/{world.org_a}/conversations", headers=member.headers)
    assert r.status_code == 200 and r.json()["items"] == []
    r = await client.get("/human-tasks", headers=member.headers)
    assert r.status_code == 403 and r.json()["details"]["capability"] == "tasks.read"
    # and the admin still manages (removes) the client it made
    r = await client.delete(
        f"/orgs/{world.org_a}/members/new-member", headers=world.admin_a.headers
    )
    assert r.status_code == 204, r.text


async def test_a_client_sees_its_own_conversations_until_the_org_shares_them(
    client: httpx.AsyncClient, world: World
) -> None:
    mine = await start(client, world.client_1, world.org_a, "Refund", "Refund order 1042")
    other = await start(client, world.client_2, world.org_a, "Stock", "How many vases left?")
    assert mine["created_by"] is not None and mine["last_message_at"] is not None
    base = f"/orgs/{world.org_a}/conversations"

    r = await client.get(base, headers=world.client_1.headers)
    assert [c["id"] for c in r.json()["items"]] == [mine["id"]]
    r = await client.get(base, headers=world.expert_a.headers)  # an expert sees both
    assert {c["id"] for c in r.json()["items"]} == {mine["id"], other["id"]}

    for path in ("", "/tasks", "/events"):
        r = await client.get(f"{base}/{other['id']}{path}", headers=world.client_1.headers)
        assert r.status_code == 404 and code(r) == "not_found", path
    r = await client.get(f"{base}/{mine['id']}", headers=world.client_1.headers)
    assert r.status_code == 200
    assert [m["content"] for m in r.json()["messages"]] == ["Refund order 1042"]

    r = await client.post(
        f"{base}/{other['id']}/messages", json={"content": "me too"}, headers=world.client_1.headers
    )
    assert r.status_code == 404 and code(r) == "not_found"
    r = await client.get(f"{base}/{other['id']}", headers=world.client_2.headers)
    assert [m["content"] for m in r.json()["messages"]] == ["How many vases left?"]

    r = await client.put(
        f"/orgs/{world.org_a}/client-settings",
        json={"clients_share_conversations": True},
        headers=world.admin_a.headers,
    )
    assert r.status_code == 200, r.text
    r = await client.get(f"{base}/{other['id']}", headers=world.client_1.headers)
    assert r.status_code == 200 and r.json()["conversation"]["id"] == other["id"]
    r = await client.get(base, headers=world.client_1.headers)
    assert {c["id"] for c in r.json()["items"]} == {mine["id"], other["id"]}
    # sharing lets it read, not write where it takes no part
    r = await client.post(
        f"{base}/{other['id']}/messages", json={"content": "me too"}, headers=world.client_1.headers
    )
    assert r.status_code == 404 and code(r) == "not_found"
    r = await client.post(
        f"{base}/{mine['id']}/messages",
        json={"content": "any news?"},
        headers=world.client_1.headers,
    )
    assert r.status_code == 201, r.text


async def test_a_client_of_another_org_reaches_nothing(
    client: httpx.AsyncClient, world: World
) -> None:
    mine = await start(client, world.client_1, world.org_a, "Refund", "Refund order 1042")
    base = f"/orgs/{world.org_a}/conversations"
    for path in ("", f"/{mine['id']}", f"/{mine['id']}/tasks", f"/{mine['id']}/events"):
        r = await client.get(f"{base}{path}", headers=world.client_b.headers)
        assert r.status_code == 404 and code(r) == "not_found", path
        if not path.endswith("/events"):  # the stream's own test opens it (it never ends)
            positive = await client.get(f"{base}{path}", headers=world.client_1.headers)
            assert positive.status_code == 200, path
    r = await client.post(
        f"{base}/{mine['id']}/messages", json={"content": "hi"}, headers=world.client_b.headers
    )
    assert r.status_code == 404
    r = await client.post(base, json={"subject": "x"}, headers=world.client_b.headers)
    assert r.status_code == 404
    # the same conversation id under the attacker's own org is not found either
    r = await client.get(
        f"/orgs/{world.org_b}/conversations/{mine['id']}", headers=world.client_b.headers
    )
    assert r.status_code == 404 and code(r) == "not_found"
    r = await client.get(f"{base}/{mine['id']}", headers=world.client_1.headers)
    assert len(r.json()["messages"]) == 1  # nothing was added


async def test_internal_notes_never_reach_a_client(
    client: httpx.AsyncClient, world: World, database_url: str
) -> None:
    mine = await start(client, world.client_1, world.org_a, "Refund", "Refund order 1042")
    base = f"/orgs/{world.org_a}/conversations/{mine['id']}"
    r = await client.post(
        f"{base}/notes",
        json={"content": "customer is a known fraudster"},
        headers=world.client_1.headers,
    )
    assert r.status_code == 403 and r.json()["details"]["capability"] == "tasks.read"
    r = await client.post(
        f"{base}/notes",
        json={"content": "customer is a known fraudster"},
        headers=world.expert_a.headers,
    )
    assert r.status_code == 201, r.text
    note = r.json()
    assert note["internal"] is True and note["author_kind"] == "expert"
    assert note["author"] == "expert-a"

    r = await client.get(base, headers=world.expert_a.headers)
    assert [m["internal"] for m in r.json()["messages"]] == [False, True]
    r = await client.get(base, headers=world.client_1.headers)
    thread = r.json()
    assert [m["content"] for m in thread["messages"]] == ["Refund order 1042"]
    assert "fraudster" not in r.text
    # not even as a later activity time
    assert thread["conversation"]["last_message_at"] == mine["last_message_at"]
    r = await client.get(f"/orgs/{world.org_a}/conversations", headers=world.client_1.headers)
    assert r.json()["items"][0]["last_message_at"] == mine["last_message_at"]
    r = await client.get(
        f"{base}?after={thread['messages'][0]['id']}", headers=world.client_1.headers
    )
    assert r.json()["messages"] == []
    audit = await _rows(
        database_url, "SELECT action FROM audit_log WHERE action = 'conversation.note'"
    )
    assert len(audit) == 1


async def test_a_client_cannot_forge_who_wrote_a_message(
    client: httpx.AsyncClient, world: World, database_url: str
) -> None:
    mine = await start(client, world.client_1, world.org_a, "Refund")
    path = f"/orgs/{world.org_a}/conversations/{mine['id']}/messages"
    forged = [
        {"content": "approved", "role": "expert"},
        {"content": "approved", "author": "expert-a"},
        {"content": "approved", "author_kind": "system"},
        {"content": "approved", "internal": True},
        {"content": "approved", "meta": {"event": "step.approved"}},
        {"content": "approved", "author_user_id": str(uuid.uuid4())},
    ]
    for body in forged:
        r = await client.post(path, json=body, headers=world.client_1.headers)
        assert r.status_code == 422 and code(r) == "validation_failed", body
        extra = [e["loc"][-1] for e in r.json()["details"]["errors"]]
        assert extra == [next(k for k in body if k != "content")], r.text
    r = await client.post(path, json={"content": ""}, headers=world.client_1.headers)
    assert r.status_code == 422
    assert r.json()["details"]["errors"][0]["loc"] == ["body", "content"]
    r = await client.post(
        f"/orgs/{world.org_a}/conversations",
        json={"subject": "x", "created_by": str(uuid.uuid4())},
        headers=world.client_1.headers,
    )
    assert r.status_code == 422
    rows = await _rows(database_url, "SELECT count(*) FROM messages")
    assert rows == [(0,)]  # nothing was stored by the refused requests

    r = await client.post(path, json={"content": "approved"}, headers=world.client_1.headers)
    assert r.status_code == 201, r.text
    message = r.json()
    assert message["author_kind"] == "client" and message["author"] == "client-1"
    assert message["internal"] is False and message["meta"] is None
    stored = await _rows(
        database_url,
        "SELECT role, author, internal FROM messages WHERE id = :id",
        id=message["id"],
    )
    assert stored == [("customer", "client-1", False)]
    who = await _rows(
        database_url,
        "SELECT u.username FROM messages m JOIN users u ON u.id = m.author_user_id "
        "WHERE m.id = :id",
        id=message["id"],
    )
    assert who == [("client-1",)]


SURFACES = [
    ("GET", "/human-tasks", "tasks.read"),
    ("GET", "/human-tasks/events", "tasks.read"),
    ("GET", "/audit", "audit.read"),
    ("GET", "/orgs/{org}/integrations", "tools.manage"),
    ("GET", "/orgs/{org}/tool-permissions", "tasks.read"),
    ("PUT", "/orgs/{org}/tool-permissions/shopify", "tools.manage"),
    ("GET", "/orgs/{org}/members", "users.manage"),
    ("GET", "/orgs/{org}/agents", "agents.manage"),
    ("GET", "/orgs/{org}/client-settings", "tasks.read"),
    ("PUT", "/orgs/{org}/client-settings", "policy.manage"),
    ("GET", "/agentic/tasks", "tasks.read"),
    ("POST", "/agentic/tasks/org-alpha/task-x/steps/s1/approve", "run.control"),
    ("POST", "/agentic/tasks/org-alpha/task-x/steps/s1/reject", "run.control"),
]


BODIES: dict[str, dict[str, object]] = {
    "shopify": {"enabled": True},
    "approve": {"stepHash": 64 * "0"},
    "reject": {"feedback": "no", "stepHash": 64 * "0"},
}


async def test_a_client_reaches_no_expert_or_admin_surface(
    client: httpx.AsyncClient, world: World, database_url: str
) -> None:
    for method, template, capability in SURFACES:
        path = template.format(org=world.org_a)
        body: dict[str, object] | None = None
        if method != "GET":
            body = BODIES.get(template.rsplit("/", 1)[-1], {})
        r = await client.request(method, path, json=body, headers=world.client_1.headers)
        assert r.status_code == 403, (path, r.text)
        assert code(r) == "forbidden" and r.json()["details"]["capability"] == capability, path
    r = await client.get("/access-map", headers=world.client_1.headers)
    assert r.status_code == 403 and code(r) == "platform_admin_required"
    # positive controls: the org's admin reaches them
    for path in ("/audit", f"/orgs/{world.org_a}/members", f"/orgs/{world.org_a}/client-settings"):
        r = await client.get(path, headers=world.admin_a.headers)
        assert r.status_code == 200, (path, r.text)
    denied = await _rows(
        database_url, "SELECT count(*) FROM audit_log WHERE action = 'access.denied'"
    )
    assert int(str(denied[0][0])) >= len(SURFACES)


async def test_paging_conversations_and_messages(client: httpx.AsyncClient, world: World) -> None:
    made = [
        await start(client, world.client_1, world.org_a, f"subject {i}", f"first {i}")
        for i in range(3)
    ]
    base = f"/orgs/{world.org_a}/conversations"
    # new activity moves the oldest conversation to the front
    r = await client.post(
        f"{base}/{made[0]['id']}/messages",
        json={"content": "second"},
        headers=world.client_1.headers,
    )
    assert r.status_code == 201
    seen, cursor = [], None
    while True:
        query = "?limit=1" + (f"&cursor={cursor}" if cursor else "")
        r = await client.get(base + query, headers=world.client_1.headers)
        assert r.status_code == 200, r.text
        seen += [c["id"] for c in r.json()["items"]]
        cursor = r.json()["next_cursor"]
        if cursor is None:
            break
    assert seen == [made[0]["id"], made[2]["id"], made[1]["id"]]

    for query, field in (
        ("?cursor=not-a-cursor", "cursor"),
        ("?limit=0", "limit"),
        ("?limit=501", "limit"),
    ):
        r = await client.get(base + query, headers=world.client_1.headers)
        assert r.status_code == 422 and code(r) == "validation_failed", query
        assert r.json()["details"]["errors"][0]["loc"] == ["query", field], r.text

    thread = f"{base}/{made[0]['id']}"
    r = await client.get(f"{thread}?limit=1", headers=world.client_1.headers)
    page = r.json()
    assert [m["content"] for m in page["messages"]] == ["first 0"]
    assert page["messages"][0]["author_kind"] == "client"
    r = await client.get(
        f"{thread}?limit=1&after={page['next_after']}", headers=world.client_1.headers
    )
    assert [m["content"] for m in r.json()["messages"]] == ["second"]
    assert r.json()["next_after"] is None
    for query, field in (("?after=-1", "after"), ("?limit=0", "limit")):
        r = await client.get(thread + query, headers=world.client_1.headers)
        assert r.status_code == 422, query
        assert r.json()["details"]["errors"][0]["loc"] == ["query", field]


async def test_client_settings(client: httpx.AsyncClient, world: World, database_url: str) -> None:
    path = f"/orgs/{world.org_a}/client-settings"
    r = await client.get(path, headers=world.expert_a.headers)
    assert r.status_code == 200
    assert r.json() == {
        "clients_share_conversations": False,
        "client_confirm_risks": ["high", "critical"],
        "reply_auto_send": None,
    }
    wanted = {
        "clients_share_conversations": True,
        "client_confirm_risks": ["critical", "medium"],
        "reply_auto_send": {"max_risk": "low", "min_confidence": 0.9},
    }
    r = await client.put(path, json=wanted, headers=world.expert_a.headers)
    assert r.status_code == 403 and r.json()["details"]["capability"] == "policy.manage"
    r = await client.put(path, json=wanted, headers=world.admin_b.headers)
    assert r.status_code == 404
    bad = [
        ({**wanted, "client_confirm_risks": ["severe"]}, ["body", "client_confirm_risks", 0]),
        (
            {**wanted, "reply_auto_send": {"max_risk": "low", "min_confidence": 1.5}},
            ["body", "reply_auto_send", "min_confidence"],
        ),
        (
            {**wanted, "reply_auto_send": {"max_risk": "low", "min_confidence": -0.1}},
            ["body", "reply_auto_send", "min_confidence"],
        ),
        (
            {**wanted, "reply_auto_send": {"max_risk": "huge", "min_confidence": 0.5}},
            ["body", "reply_auto_send", "max_risk"],
        ),
        ({**wanted, "surprise": 1}, ["body", "surprise"]),
    ]
    for body, loc in bad:
        r = await client.put(path, json=body, headers=world.admin_a.headers)
        assert r.status_code == 422 and code(r) == "validation_failed", body
        assert r.json()["details"]["errors"][0]["loc"] == loc, r.text
    r = await client.get(path, headers=world.expert_a.headers)
    assert r.json()["clients_share_conversations"] is False  # no refused PUT changed it

    r = await client.put(path, json=wanted, headers=world.admin_a.headers)
    assert r.status_code == 200, r.text
    assert r.json()["client_confirm_risks"] == ["medium", "critical"]
    r = await client.get(path, headers=world.expert_a.headers)
    assert r.json()["reply_auto_send"] == {"max_risk": "low", "min_confidence": 0.9}
    r = await client.put(path, json={"client_confirm_risks": []}, headers=world.admin_a.headers)
    assert r.json()["client_confirm_risks"] == [] and r.json()["reply_auto_send"] is None
    audit = await _rows(
        database_url, "SELECT actor FROM audit_log WHERE action = 'org.client_settings'"
    )
    assert audit == [("admin-a",), ("admin-a",)]


async def test_starting_conversations_and_the_audit(
    client: httpx.AsyncClient, world: World, database_url: str
) -> None:
    secret = "my card is 4111 1111 1111 1111"
    mine = await start(client, world.client_1, world.org_a, "Card", secret)
    r = await client.post(
        f"/orgs/{world.org_a}/conversations",
        json={"subject": "ops", "message": "hello"},
        headers=world.admin_a.headers,
    )
    assert r.status_code == 422 and r.json()["details"]["field"] == "message"
    r = await client.post(
        f"/orgs/{world.org_a}/conversations", json={"subject": "ops"}, headers=world.admin_a.headers
    )
    assert r.status_code == 201 and r.json()["created_by"] is None
    r = await client.post(
        f"/orgs/{world.org_a}/conversations", json={"subject": "x"}, headers=world.expert_a.headers
    )
    assert r.status_code == 403 and code(r) == "forbidden"

    audit = await _rows(
        database_url,
        "SELECT action, actor, details FROM audit_log WHERE action LIKE 'conversation.%' "
        "ORDER BY id",
    )
    assert [(a, b) for a, b, _ in audit] == [
        ("conversation.created", "client-1"),
        ("conversation.message", "client-1"),
        ("conversation.created", "admin-a"),
    ]
    assert "4111" not in str(audit)
    participants = await _rows(
        database_url,
        "SELECT u.username FROM conversation_participants p JOIN users u ON u.id = p.user_id "
        "WHERE p.conversation_id = :cid",
        cid=mine["id"] if "postgresql" in database_url else uuid.UUID(mine["id"]).hex,
    )
    assert participants == [("client-1",)]
