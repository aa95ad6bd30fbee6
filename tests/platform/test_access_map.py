"""`GET|PUT /access-map`: the access map read and replaced through the API by platform
administrators only (an org's admin included among the refused), validated (unknown
capability, empty or orphaned role, a role holding the platform administrators'
`access.manage`), audited with before and after, and in effect on another replica of
the platform at its next request, without a restart."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from platform_api.app import create_app
from tests.platform.conftest import Api, RecordingNamespaces, TwoOrgs, make_settings


async def _map(client: httpx.AsyncClient, headers: dict[str, str]) -> dict[str, list[str]]:
    r = await client.get("/access-map", headers=headers)
    assert r.status_code == 200, r.text
    roles: dict[str, list[str]] = r.json()["roles"]
    return roles


async def test_reading_and_changing_the_map_needs_a_platform_administrator(
    client: httpx.AsyncClient, two_orgs: TwoOrgs
) -> None:
    for caller in (two_orgs.viewer_a, two_orgs.expert_a, two_orgs.admin_a):
        r = await client.get("/access-map", headers=caller.headers)
        assert r.status_code == 403 and r.json()["code"] == "platform_admin_required", r.text
        r = await client.put(
            "/access-map", json={"roles": {"viewer": ["tasks.read"]}}, headers=caller.headers
        )
        assert r.status_code == 403 and r.json()["code"] == "platform_admin_required", r.text
    r = await client.get("/access-map", headers=two_orgs.admin.headers)
    assert r.status_code == 200, r.text
    body = r.json()
    # one capability for deciding: whoever held tasks.decide holds run.control (0007)
    assert body["roles"]["expert"] == ["org.grantable", "run.control", "tasks.read"]
    assert body["roles"]["viewer"] == ["org.grantable", "tasks.read"]
    assert all("tasks.decide" not in caps for caps in body["roles"].values())
    assert {"access.manage", "run.control", "tasks.read"} <= set(body["capabilities"])


async def test_bad_maps_are_refused_and_change_nothing(
    client: httpx.AsyncClient, two_orgs: TwoOrgs, db: AsyncEngine
) -> None:
    admin = two_orgs.admin.headers
    before = await _map(client, admin)
    typo = {**before, "viewer": ["tasks.read", "tasks.raed"]}
    cases: list[tuple[dict[str, object], int, str]] = [
        ({"roles": typo}, 422, "unknown_capability"),
        ({"roles": {**before, "empty": []}}, 422, "invalid_role"),
        ({"roles": {k: v for k, v in before.items() if k != "viewer"}}, 422, "invalid_role"),
        ({"roles": {**before, "Bad Role": ["tasks.read"]}}, 422, "validation_failed"),
        # the platform administrators' capability, never a role's
        (
            {"roles": {**before, "admin": [*before["admin"], "access.manage"]}},
            422,
            "platform_capability",
        ),
    ]
    for body, status, code in cases:
        r = await client.put("/access-map", json=body, headers=admin)
        assert (r.status_code, r.json()["code"]) == (status, code), r.text
    assert await _map(client, admin) == before
    async with db.connect() as conn:
        changed = await conn.execute(
            text("SELECT count(*) FROM audit_log WHERE action = 'access_map.changed'")
        )
        assert changed.scalar_one() == 0


async def test_no_map_locks_the_platform_administrators_out(
    client: httpx.AsyncClient, api: Api, two_orgs: TwoOrgs
) -> None:
    """The map gives org roles only: the platform administrator whose own org role is
    narrowed to reading keeps the map (and its admin role no longer manages the org)."""
    admin = two_orgs.admin.headers
    before = await _map(client, admin)
    narrowed = {**before, "admin": ["tasks.read"]}
    r = await client.put("/access-map", json={"roles": narrowed}, headers=admin)
    assert r.status_code == 200, r.text
    assert await _map(client, admin) == narrowed
    r = await client.put("/access-map", json={"roles": before}, headers=admin)
    assert r.status_code == 200, r.text


@pytest.fixture
async def second_replica(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """Another platform API process on the same database."""
    app = create_app(make_settings(database_url), namespaces=RecordingNamespaces())
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://b") as c,
    ):
        yield c


async def test_a_change_is_audited_and_in_effect_on_another_replica_at_once(
    client: httpx.AsyncClient,
    second_replica: httpx.AsyncClient,
    two_orgs: TwoOrgs,
    db: AsyncEngine,
) -> None:
    admin, viewer = two_orgs.admin.headers, two_orgs.viewer_a.headers
    assert (await second_replica.get("/audit", headers=viewer)).status_code == 403
    before = await _map(client, admin)
    after = {**before, "viewer": ["audit.read", "tasks.read"]}
    r = await client.put("/access-map", json={"roles": after}, headers=admin)
    assert r.status_code == 200 and r.json()["roles"] == after, r.text
    # the other replica answers the viewer with its new capability at the next request
    assert (await second_replica.get("/audit", headers=viewer)).status_code == 200
    me = await second_replica.get("/users/me", headers=viewer)
    assert me.json()["capabilities"] == ["audit.read", "tasks.read"]
    # and takes it away as promptly
    r = await second_replica.put("/access-map", json={"roles": before}, headers=admin)
    assert r.status_code == 200, r.text
    assert (await client.get("/audit", headers=viewer)).status_code == 403
    async with db.connect() as conn:
        rows = (
            await conn.execute(
                text(
                    "SELECT actor, chain, details FROM audit_log "
                    "WHERE action = 'access_map.changed' ORDER BY seq"
                )
            )
        ).all()
    assert [(r.actor, r.chain) for r in rows] == [("admin", "platform")] * 2
    assert rows[0].details == {"before": before, "after": after}
    assert rows[1].details == {"before": after, "after": before}
    # an identical map changes nothing and is not audited again
    r = await client.put("/access-map", json={"roles": before}, headers=admin)
    assert r.status_code == 200
    async with db.connect() as conn:
        count = await conn.execute(
            text("SELECT count(*) FROM audit_log WHERE action = 'access_map.changed'")
        )
        assert count.scalar_one() == 2
