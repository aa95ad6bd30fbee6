"""Loose ends of the agent-facing surface, from the attacker's side (a compromised agent
holding its valid token and callback secret, or anyone who can reach the platform):

- the agent's token opens none of the people's endpoints (admin, org settings, decisions);
- tokens naming invented key ids cannot make the platform re-read the published keys on
  every request (the reads are counted on the platform's own Kubernetes client);
- an agent event over the documented limit is refused with 413 before it is read whole,
  parsed or stored, and JSON nested past the parser's depth is a clean 422.

Each refusal has its positive control beside it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select

from humanwork_core import tokens
from platform_api.agent_api.events import MAX_EVENT_BYTES
from platform_api.db import SESSIONS
from platform_api.kube import published
from platform_api.models import AgentEvent
from platform_api.state import KUBE
from tests.agents import agent_credentials, provision_agent
from tests.conftest import Cluster
from tests.platform.conftest import Api
from tests.platform_k8s.conftest import Orgs
from tests.platform_k8s.test_agent_events import event, post_event

WHOAMI = "/v1/agent-api/whoami"


@pytest.fixture
def agent_a(cluster: Cluster, orgs: Orgs) -> tuple[str, str]:
    provision_agent(cluster, orgs.ns_a, orgs.org_a)
    return agent_credentials(cluster, orgs.ns_a)


def people_routes(orgs: Orgs) -> list[tuple[str, str, dict[str, Any] | None, str]]:
    """(method, path, body, who reads it as the positive control: root or the org admin)."""
    org = orgs.org_a
    return [
        ("GET", "/orgs", None, "root"),
        ("POST", "/orgs", {"slug": f"x-{uuid.uuid4().hex[:6]}", "name": "X"}, ""),
        ("GET", "/users/me", None, "root"),
        ("POST", "/users", {"username": "mole", "password": "p" * 16, "role": "admin"}, ""),
        ("GET", "/access-map", None, "root"),
        ("GET", "/audit", None, "root"),
        ("GET", f"/orgs/{org}/policy", None, "admin"),
        ("PUT", f"/orgs/{org}/tool-permissions/web", {"enabled": True}, ""),
        ("PATCH", f"/orgs/{org}/agents/agent", {"spec": {"enabledTools": ["web"]}}, ""),
        ("GET", "/human-tasks", None, "admin"),
    ]


async def test_an_agents_token_opens_no_admin_endpoint(
    client: httpx.AsyncClient, api: Api, orgs: Orgs, agent_a: tuple[str, str]
) -> None:
    token, _ = agent_a
    as_agent = {"Authorization": f"Bearer {token}"}
    assert (await client.get(WHOAMI, headers=as_agent)).status_code == 200  # a valid token
    root = await api.admin()
    for method, path, body, control in people_routes(orgs):
        r = await client.request(method, path, json=body, headers=as_agent)
        assert r.status_code in (401, 403, 404), (method, path, r.status_code, r.text)
        assert r.json()["code"] in ("unauthenticated", "forbidden", "not_found"), (path, r.text)
        if control:  # the positive control: a person's token reads it
            caller = root if control == "root" else orgs.admin_a
            ok = await client.get(path, headers=caller.headers)
            assert ok.status_code == 200, (path, ok.text)
    # and nothing the agent sent changed anything
    mole = await client.post("/auth/token", json={"username": "mole", "password": "p" * 16})
    assert mole.status_code == 401, mole.text  # no such user was made
    tools = await client.get(f"/orgs/{orgs.org_a}/tool-permissions", headers=orgs.admin_a.headers)
    assert tools.status_code == 200 and '"web"' not in tools.text
    # the positive control of a write: the org's admin enables the tool
    r = await client.put(
        f"/orgs/{orgs.org_a}/tool-permissions/web",
        json={"enabled": True},
        headers=orgs.admin_a.headers,
    )
    assert r.status_code == 200, r.text


class CountingReads:
    """Counts the platform's reads of the published key ConfigMap."""

    def __init__(self, inner: Callable[[str, str], Awaitable[dict[str, str]]]) -> None:
        self.inner, self.reads = inner, 0

    async def __call__(self, namespace: str, name: str) -> dict[str, str]:
        if name == published.JWKS_CONFIG_MAP:
            self.reads += 1
        return await self.inner(namespace, name)


async def test_invented_key_ids_do_not_make_the_platform_reread_the_keys(
    app: FastAPI,
    client: httpx.AsyncClient,
    orgs: Orgs,
    agent_a: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kube = KUBE.of(app.state)
    assert kube is not None
    counter = CountingReads(kube.config_map_data)
    monkeypatch.setattr(kube, "config_map_data", counter)
    # a window longer than the test: any read past the first is one the attacker caused
    monkeypatch.setattr(published, "KEYS_TTL_SECONDS", 3600.0)
    monkeypatch.setattr(published, "KEYS_REFRESH_SECONDS", 3600.0, raising=False)
    published.AGENT_KEYS.put(app.state, published.AgentKeys())
    token, _ = agent_a
    ok = await client.get(WHOAMI, headers={"Authorization": f"Bearer {token}"})
    assert ok.status_code == 200, ok.text  # the positive control: keys read once
    assert counter.reads == 1
    claims = tokens.read_minted_token(token).claims

    def invented() -> str:
        return tokens.mint_agent_token(
            tokens.generate_signing_key(),
            agent_id=claims.subject,
            org_id=orgs.org_a,
            namespace=orgs.ns_a,
            ttl_seconds=600,
            now=datetime.now(UTC),
        ).token

    answers = await asyncio.gather(
        *(client.get(WHOAMI, headers={"Authorization": f"Bearer {invented()}"}) for _ in range(30))
    )
    assert {r.status_code for r in answers} == {401}
    assert {r.json()["details"]["reason"] for r in answers} == {"token_unknown_key"}
    assert counter.reads == 1
    again = await client.get(WHOAMI, headers={"Authorization": f"Bearer {token}"})
    assert again.status_code == 200, again.text


async def stored_events(app: FastAPI, org_id: str) -> int:
    async with SESSIONS.of(app.state)() as session:
        count = await session.scalar(
            select(func.count())
            .select_from(AgentEvent)
            .where(AgentEvent.org_id == uuid.UUID(org_id))
        )
    return int(count or 0)


async def test_an_oversized_event_is_refused_before_it_is_read_whole(
    app: FastAPI, client: httpx.AsyncClient, orgs: Orgs, agent_a: tuple[str, str]
) -> None:
    _, secret = agent_a
    chunk, sent = b" " * 65536, 0

    async def huge() -> AsyncIterator[bytes]:
        nonlocal sent
        yield b'{"agent_id": "' + orgs.ns_a.encode() + b'/agent", "payload": "'
        for _ in range(1024):  # 64 MiB
            sent += len(chunk)
            yield chunk
        yield b'"}'

    r = await client.post("/v1/agent-events", content=huge())
    assert r.status_code == 413, r.text
    assert r.json()["code"] == "payload_too_large"
    assert r.json()["details"]["limit"] == str(MAX_EVENT_BYTES)
    assert sent <= MAX_EVENT_BYTES + 2 * len(chunk)  # never read whole

    declared = await client.post(
        "/v1/agent-events",
        content=b"{}",
        headers={"Content-Length": str(MAX_EVENT_BYTES + 1)},
    )
    assert declared.status_code == 413 and declared.json()["code"] == "payload_too_large"

    padded = event(orgs.ns_a, orgs.org_a, payload={"text": "x" * MAX_EVENT_BYTES})
    signed = await post_event(client, secret, padded)  # signed, and still too large
    assert signed.status_code == 413 and signed.json()["code"] == "payload_too_large"
    assert await stored_events(app, orgs.org_a) == 0

    # the positive control: a signed event under the limit is stored
    fits = await post_event(client, secret, event(orgs.ns_a, orgs.org_a))
    assert fits.status_code == 200, fits.text
    assert await stored_events(app, orgs.org_a) == 1


async def test_an_event_nested_past_the_parsers_depth_is_a_clean_422(
    app: FastAPI, client: httpx.AsyncClient, orgs: Orgs, agent_a: tuple[str, str]
) -> None:
    _, secret = agent_a
    depth = 50_000
    raw = (
        b'{"agent_id": "'
        + orgs.ns_a.encode()
        + b'/agent", "payload": '
        + b"[" * depth
        + b"]" * depth
        + b"}"
    )
    assert len(raw) < MAX_EVENT_BYTES
    r = await post_event(client, secret, raw)
    assert r.status_code == 422, r.text
    assert r.json()["code"] == "validation_failed"
    assert await stored_events(app, orgs.org_a) == 0
    fits = await post_event(client, secret, event(orgs.ns_a, orgs.org_a))
    assert fits.status_code == 200, fits.text
