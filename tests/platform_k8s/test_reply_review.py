"""The bar for sending a drafted reply is the org's, not the agent's (issue 14): a
taken-over agent (tests/platform_k8s/takeover.py) answers every chat command with a
draft it calls certain, harmless and unflagged. Without the admin's auto-send rule
(`orgs.reply_auto_send`, null by default) that draft waits for an expert; under a rule
that allows it, and the default threshold (70), it is sent, which is the org's choice; an
org that sets `confidenceThreshold: 100` has every reply reviewed, whatever confidence
the agent claims, rule or not.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.platform_k8s.conftest import Orgs
from tests.platform_k8s.takeover import TakenOverAgent, agent, settings

__all__ = ["agent", "settings"]  # fixtures


async def draft(client: httpx.AsyncClient, orgs: Orgs) -> dict[str, Any]:
    """A customer writes in a new conversation; the requester asks the agent for a reply."""
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
    return made


async def test_an_org_that_reviews_every_reply_is_not_overruled_by_a_certain_agent(
    client: httpx.AsyncClient, orgs: Orgs, agent: TakenOverAgent, db: AsyncEngine
) -> None:
    # no admin rule: the agent's certainty sends nothing
    held = await draft(client, orgs)
    assert held["confidence"] == 1.0 and held["state"] == "pending", held

    # the positive control: under the admin's rule and the default threshold it is sent
    async with db.begin() as conn:
        await conn.execute(
            text("UPDATE orgs SET reply_auto_send = :r WHERE id = :o"),
            {"r": json.dumps({"max_risk": "medium", "min_confidence": 0.9}), "o": orgs.org_a},
        )
    sent = await draft(client, orgs)
    assert sent["confidence"] == 1.0 and sent["state"] == "sent", sent

    r = await client.patch(
        f"/orgs/{orgs.org_a}/agents/agent",
        json={"spec": {"confidenceThreshold": 100}},
        headers=orgs.admin_a.headers,
    )
    assert r.status_code == 200, r.text
    held = await draft(client, orgs)
    assert held["confidence"] == 1.0 and held["state"] == "pending", held
    assert not held.get("sent_text")
    r = await client.get(
        "/human-tasks", params={"org_id": orgs.org_a, "limit": 500}, headers=orgs.expert.headers
    )
    assert r.status_code == 200, r.text
    assert f"replies/{held['id']}" in {i["id"] for i in r.json()["items"]}

    # an agent claiming more than certainty gains nothing either
    agent.chat_answer = {**agent.chat_answer, "confidence": 7.5}
    again = await draft(client, orgs)
    assert again["confidence"] == 1.0 and again["state"] == "pending", again
