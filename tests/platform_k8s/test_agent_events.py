"""Signed agent events and the agent's read endpoints, from the attacker's side too.

`POST /v1/agent-events` accepts an event signed with the instance's callback secret (the
value the operator wrote into the agent's Secret), audits it once however often it is
replayed, and refuses tampered, stale, unsigned, foreign-signed and wrong-org events.
`config.applied` makes the operator report ConfigApplied. The conversation and knowledge
endpoints answer only the agent's own org.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from humanwork_core import signing
from humanwork_core.signing import SIGNATURE_HEADER
from platform_api.db import SESSIONS
from platform_api.models import Conversation, Message
from tests.agents import agent_credentials, condition, get_instance, provision_agent
from tests.conftest import Cluster
from tests.platform.conftest import Caller
from tests.platform_k8s.conftest import Orgs
from tests.support import eventually


def event(ns: str, org_id: str, **fields: Any) -> dict[str, Any]:
    return {
        "event_type": "task.plan_ready",
        "agent_id": f"{ns}/agent",
        "org_id": org_id,
        "task_id": "reconcile-october",
        "step_id": None,
        "timestamp": datetime.now(UTC).isoformat(),
        "payload": {"steps": 2},
        "idempotency_key": str(uuid.uuid4()),
        **fields,
    }


async def post_event(
    client: httpx.AsyncClient,
    secret: str | None,
    body: dict[str, Any] | bytes,
    *,
    at: datetime | None = None,
    raw_override: bytes | None = None,
) -> httpx.Response:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if secret is not None:
        headers[SIGNATURE_HEADER] = signing.sign(secret, raw, at or datetime.now(UTC))
    return await client.post("/v1/agent-events", content=raw_override or raw, headers=headers)


async def audit_rows(
    client: httpx.AsyncClient, caller: Caller, action: str
) -> list[dict[str, Any]]:
    r = await client.get("/audit", params={"action": action, "limit": 500}, headers=caller.headers)
    assert r.status_code == 200, r.text
    items: list[dict[str, Any]] = r.json()["items"]
    return items


@pytest.fixture
def agent_a(cluster: Cluster, orgs: Orgs) -> tuple[str, str]:
    provision_agent(cluster, orgs.ns_a, orgs.org_a)
    return agent_credentials(cluster, orgs.ns_a)


async def test_a_signed_event_is_stored_and_audited_once_however_often_replayed(
    client: httpx.AsyncClient, orgs: Orgs, agent_a: tuple[str, str]
) -> None:
    _, secret = agent_a
    body = event(orgs.ns_a, orgs.org_a)
    first = await post_event(client, secret, body)
    assert first.status_code == 200, first.text
    assert first.json() == {
        "accepted": True,
        "duplicate": False,
        "idempotency_key": body["idempotency_key"],
    }
    again = await post_event(client, secret, body)  # the same signed request, replayed
    assert again.status_code == 200 and again.json()["duplicate"] is True
    rows = await audit_rows(client, orgs.admin_a, "agent.task.plan_ready")
    mine = [r for r in rows if r["details"]["idempotency_key"] == body["idempotency_key"]]
    assert len(mine) == 1
    assert mine[0]["actor"] == f"agent:{orgs.ns_a}/agent"
    assert mine[0]["details"]["payload"] == {"steps": 2}


async def test_forged_tampered_stale_and_unsigned_events_are_refused(
    client: httpx.AsyncClient, cluster: Cluster, orgs: Orgs, agent_a: tuple[str, str]
) -> None:
    _, secret = agent_a
    provision_agent(cluster, orgs.ns_b, orgs.org_b)
    _, secret_b = agent_credentials(cluster, orgs.ns_b)
    assert secret_b != secret

    body = event(orgs.ns_a, orgs.org_a)
    raw = json.dumps(body).encode()
    tampered = raw.replace(b'"steps": 2', b'"steps": 9')
    cases: dict[str, tuple[httpx.Response, str]] = {
        "unsigned": (await post_event(client, None, body), "signature_missing"),
        "tampered body": (
            await post_event(client, secret, body, raw_override=tampered),
            "signature_mismatch",
        ),
        "another agent's secret": (await post_event(client, secret_b, body), "signature_mismatch"),
        "a made-up secret": (
            await post_event(client, signing.generate_secret(), body),
            "signature_mismatch",
        ),
        "ten minutes old": (
            await post_event(client, secret, body, at=datetime.now(UTC) - timedelta(minutes=10)),
            "signature_expired",
        ),
        "unknown agent": (
            await post_event(client, secret, event("org-nowhere", orgs.org_a)),
            "unknown_agent",
        ),
        # org B's agent, correctly signed, claiming to act for org A
        "wrong org": (
            await post_event(client, secret_b, event(orgs.ns_b, orgs.org_a)),
            "wrong_org",
        ),
    }
    for label, (response, reason) in cases.items():
        assert response.status_code == 401, (label, response.text)
        assert response.json()["code"] == "signature_refused", label
        assert response.json()["details"]["reason"] == reason, (label, response.json())
        assert secret not in response.text
    malformed = await client.post(
        "/v1/agent-events",
        content=b"{}",
        headers={SIGNATURE_HEADER: "t=1,v1=zz", "Content-Type": "application/json"},
    )
    assert malformed.status_code == 422, malformed.text
    rows = await audit_rows(client, orgs.admin_a, "agent.task.plan_ready")
    assert all(r["details"]["idempotency_key"] != body["idempotency_key"] for r in rows)


async def test_config_applied_events_make_the_operator_report_config_applied(
    client: httpx.AsyncClient, cluster: Cluster, orgs: Orgs, agent_a: tuple[str, str]
) -> None:
    _, secret = agent_a
    instance = get_instance(cluster, orgs.ns_a)
    wanted = instance["status"]["configHash"]
    assert condition(instance, "ConfigApplied")["status"] != "True"
    r = await post_event(
        client,
        secret,
        event(orgs.ns_a, orgs.org_a, event_type="config.applied", payload={"configHash": wanted}),
    )
    assert r.status_code == 200, r.text
    annotations = get_instance(cluster, orgs.ns_a)["metadata"]["annotations"]
    assert annotations["humanwork.io/config-applied"] == wanted

    def applied() -> bool:
        return condition(get_instance(cluster, orgs.ns_a), "ConfigApplied")["status"] == "True"

    assert eventually(applied, timeout=30)


async def test_the_agent_reads_only_its_orgs_conversations_and_knowledge(
    client: httpx.AsyncClient,
    app: Any,
    cluster: Cluster,
    orgs: Orgs,
    agent_a: tuple[str, str],
) -> None:
    token, _ = agent_a
    bearer = {"Authorization": f"Bearer {token}"}
    for caller, title, content in (
        (orgs.admin_a, "Refund policy", "Refunds over 100 EUR need a second approver."),
        (orgs.admin_a, "Shipping", "Parcels ship within two days; a refund takes a week."),
        (orgs.admin_b, "Refund policy of B", "Org B refunds everything, no questions asked."),
    ):
        org = caller.org_ids[0]
        r = await client.post(
            f"/orgs/{org}/knowledge",
            json={"title": title, "content": content},
            headers=caller.headers,
        )
        assert r.status_code == 201, r.text

    found = await client.get("/v1/agent-api/context", params={"query": "refund"}, headers=bearer)
    assert found.status_code == 200, found.text
    titles = [hit["title"] for hit in found.json()["hits"]]
    assert titles == ["Refund policy", "Shipping"]  # title words count double; B's never
    nothing = await client.get("/v1/agent-api/context", params={"query": "zebra"}, headers=bearer)
    assert nothing.json()["hits"] == []

    async with SESSIONS.of(app.state)() as session, session.begin():
        mine = Conversation(org_id=uuid.UUID(orgs.org_a), subject="Order 1001")
        theirs = Conversation(org_id=uuid.UUID(orgs.org_b), subject="Order 2002")
        session.add_all([mine, theirs])
        await session.flush()
        session.add_all(
            [
                Message(conversation_id=mine.id, role="customer", author="c@x", content="Hi"),
                Message(conversation_id=mine.id, role="agent", author="agent", content="Hello"),
                Message(conversation_id=theirs.id, role="customer", author="d@y", content="B"),
            ]
        )
    messages = await client.get(f"/v1/agent-api/conversations/{mine.id}/messages", headers=bearer)
    assert messages.status_code == 200, messages.text
    assert [m["content"] for m in messages.json()["messages"]] == ["Hi", "Hello"]
    foreign = await client.get(f"/v1/agent-api/conversations/{theirs.id}/messages", headers=bearer)
    assert foreign.status_code == 404 and foreign.json()["code"] == "not_found"
    anonymous = await client.get(f"/v1/agent-api/conversations/{mine.id}/messages")
    assert anonymous.status_code == 401
