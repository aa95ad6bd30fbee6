"""`GET /human-tasks/{id}`: the request prompt, the whole plan and the redacted conversation
thread; and the conversation endpoints that feed it."""

from __future__ import annotations

import uuid

import httpx

from platform_api.human_tasks.redact import redact
from tests.platform_k8s.conftest import Orgs, TaskApi, ticked

SECRETS = {
    "email": "jane.doe@example.com",
    "phone": "+44 20 7946 0958",
    "card": "4111 1111 1111 1111",
    "token": "sk-live-abcdef1234567890XYZ",
}
MESSAGES = [
    ("customer", "jane.doe@example.com", f"Hi, I am {SECRETS['email']}; call {SECRETS['phone']}"),
    ("customer", "jane", f"Refund to card {SECRETS['card']} please, order 1042"),
    ("agent", "shop", f"Checking with api_key={SECRETS['token']} (order 1042 of 2026-10-01)"),
]


async def conversation(client: httpx.AsyncClient, orgs: Orgs) -> str:
    r = await client.post(
        f"/orgs/{orgs.org_a}/conversations",
        json={"subject": f"Order 1042 for {SECRETS['email']}"},
        headers=orgs.admin_a.headers,
    )
    assert r.status_code == 201, r.text
    conversation_id: str = r.json()["id"]
    for role, author, content in MESSAGES:
        r = await client.post(
            f"/conversations/{conversation_id}/messages",
            json={"role": role, "author": author, "content": content},
            headers=orgs.admin_a.headers,
        )
        assert r.status_code == 201, r.text
        assert r.json()["content"] == content  # stored as written
    return conversation_id


async def test_the_detail_view_shows_prompt_plan_and_redacted_thread(
    tasks: TaskApi, orgs: Orgs, client: httpx.AsyncClient
) -> None:
    conversation_id = await conversation(client, orgs)
    made = await tasks.create(orgs.requester, orgs.org_a, conversationId=conversation_id)
    await tasks.until(orgs.viewer, made["id"], ticked)

    r = await client.get(f"/human-tasks/{made['id']}/read", headers=orgs.viewer.headers)
    assert r.status_code == 200, r.text
    view = r.json()
    assert view["id"] == f"{made['id']}/read" and view["task_id"] == made["id"]
    assert view["run_id"] == made["uid"] and view["org_id"] == orgs.org_a
    assert view["prompt"] == made["spec"]["description"]
    assert (view["status"], view["risk"], view["phase"]) == ("pending", "high", "PendingApproval")
    assert view["deadline"] and view["near_deadline"] is False and view["archived"] is False
    plan = view["plan"]
    assert [s["id"] for s in plan] == ["read", "write"]
    assert plan[0]["tool"] == "amazon_query" and plan[0]["parameters"] == {"month": "2026-10"}
    assert plan[1]["risk"] == "critical" and plan[1]["required_approvals"] == 2
    assert plan[0]["step_hash"] == made["step_hashes"]["read"]
    assert plan[0]["decision"] is None and plan[0]["execution"] is None

    thread = view["conversation"]
    assert thread["id"] == conversation_id
    # the people's messages (the platform's own, role system, follow each step)
    thread["messages"] = [m for m in thread["messages"] if m["role"] != "system"]
    assert [m["role"] for m in thread["messages"]] == ["customer", "customer", "agent"]
    for secret in SECRETS.values():
        assert secret not in r.text
    assert "[email]" in thread["messages"][0]["content"]
    assert "[phone]" in thread["messages"][0]["content"]
    assert thread["messages"][0]["author"] == "[email]"
    assert "[card]" in thread["messages"][1]["content"]
    assert "order 1042" in thread["messages"][1]["content"]  # order numbers are kept
    assert "[token]" in thread["messages"][2]["content"] and "2026-10-01" in r.text
    assert thread["subject"] == "Order 1042 for [email]"
    assert thread["redactions"] == {"email": 3, "phone": 1, "card": 1, "token": 1}

    # the decision shows up in the plan; the step is no longer pending
    ok = await tasks.decide(orgs.expert, made["id"], "read")
    assert ok.status_code == 200, ok.text
    after = (
        await client.get(f"/human-tasks/{made['id']}/read", headers=orgs.viewer.headers)
    ).json()
    assert after["status"] == "decided"
    assert after["plan"][0]["decision"]["by"] == orgs.expert.username
    waiting = await client.get(f"/human-tasks/{made['id']}/write", headers=orgs.viewer.headers)
    assert waiting.json()["status"] == "waiting"  # its turn comes once `read` executed


async def test_another_org_finds_no_human_task(
    tasks: TaskApi, orgs: Orgs, client: httpx.AsyncClient
) -> None:
    conversation_id = await conversation(client, orgs)
    made = await tasks.create(orgs.requester, orgs.org_a, conversationId=conversation_id)
    for caller in (orgs.expert_b, orgs.admin_b):
        for path in (
            f"/human-tasks/{made['id']}/read",
            f"/human-tasks/{orgs.ns_b}/{made['name']}/read",
        ):
            r = await client.get(path, headers=caller.headers)
            assert r.status_code == 404 and r.json()["code"] == "not_found", r.text
    r = await client.post(
        f"/conversations/{conversation_id}/messages",
        json={"role": "agent", "author": "x", "content": "y"},
        headers=orgs.admin_b.headers,
    )
    assert r.status_code == 404 and r.json()["code"] == "not_found"
    r = await client.get(f"/human-tasks/{made['id']}/nope", headers=orgs.viewer.headers)
    assert r.status_code == 404
    r = await client.get(f"/human-tasks/{orgs.ns_a}/task-missing/read", headers=orgs.viewer.headers)
    assert r.status_code == 404


async def test_conversations_need_agents_manage(orgs: Orgs, client: httpx.AsyncClient) -> None:
    body = {"subject": "s"}
    r = await client.post(
        f"/orgs/{orgs.org_a}/conversations", json=body, headers=orgs.expert.headers
    )
    assert r.status_code == 403 and r.json()["code"] == "forbidden"
    r = await client.post(
        f"/orgs/{orgs.org_a}/conversations", json=body, headers=orgs.admin_b.headers
    )
    assert r.status_code == 404
    chosen = str(uuid.uuid4())
    r = await client.post(
        f"/orgs/{orgs.org_a}/conversations",
        json={"id": chosen, "subject": "s"},
        headers=orgs.admin_a.headers,
    )
    assert r.status_code == 201 and r.json()["id"] == chosen
    again = await client.post(
        f"/orgs/{orgs.org_a}/conversations",
        json={"id": chosen, "subject": "s"},
        headers=orgs.admin_a.headers,
    )
    assert again.status_code == 409


def test_the_redactor() -> None:
    text, counts = redact(
        "mail a.b+c@shop.example.co.uk, phone (555) 010-2233, card 5500-0000-0000-0004, "
        "not a card 1234 5678 9012 3456, jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl, "
        "Bearer abc.def-123456, password: hunter2, amount 1200.50, order 12345, 2026-10-01"
    )
    assert counts == {"email": 1, "phone": 1, "card": 1, "token": 3}
    for kept in ("1234 5678 9012 3456", "1200.50", "order 12345", "2026-10-01"):
        assert kept in text
    for gone in ("a.b+c@", "010-2233", "5500-0000", "eyJhbG", "abc.def", "hunter2"):
        assert gone not in text
