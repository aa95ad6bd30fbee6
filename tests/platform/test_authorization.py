"""Authorisation: capabilities from the access map, 403 with an audit row for a missing
capability, and the attacker's matrix: another org's user finds nothing anywhere."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.platform.conftest import Api, TwoOrgs

# method, path template ({org} = the victim org), JSON body, capability
ORG_ENDPOINTS: list[tuple[str, str, dict[str, Any] | None]] = [
    ("GET", "/orgs/{org}", None),
    ("GET", "/orgs/{org}/tool-permissions", None),
    ("PUT", "/orgs/{org}/tool-permissions/shopify", {"enabled": False}),
    ("GET", "/orgs/{org}/integrations", None),
    ("PUT", "/orgs/{org}/integrations/shopify", {"credentials": {"token": "stolen-0001"}}),
    ("DELETE", "/orgs/{org}/integrations/shopify", None),
    ("GET", "/audit?org={org}", None),
]


async def _seed_org_a(client: httpx.AsyncClient, orgs: TwoOrgs) -> None:
    h = orgs.admin_a.headers
    r = await client.put(
        f"/orgs/{orgs.org_a}/tool-permissions/shopify",
        json={"enabled": True, "config": {"ratePerHour": 5}},
        headers=h,
    )
    assert r.status_code == 200
    r = await client.put(
        f"/orgs/{orgs.org_a}/integrations/shopify",
        json={"credentials": {"token": "shpat-victim-secret"}},
        headers=h,
    )
    assert r.status_code == 200


async def _snapshot(db: AsyncEngine, org: str) -> tuple[Any, ...]:
    async with db.connect() as conn:
        perms = (
            await conn.execute(
                text("SELECT tool, enabled, config::text FROM tool_permissions WHERE org_id = :o"),
                {"o": org},
            )
        ).all()
        creds = (
            await conn.execute(
                text("SELECT type, ciphertext FROM integration_credentials WHERE org_id = :o"),
                {"o": org},
            )
        ).all()
        audit = (
            await conn.execute(text("SELECT count(*) FROM audit_log WHERE org_id = :o"), {"o": org})
        ).scalar_one()
    return tuple(perms), tuple(creds), audit


@pytest.mark.parametrize(("method", "path", "body"), ORG_ENDPOINTS)
async def test_another_orgs_admin_finds_nothing(
    client: httpx.AsyncClient,
    two_orgs: TwoOrgs,
    db: AsyncEngine,
    method: str,
    path: str,
    body: dict[str, Any] | None,
) -> None:
    await _seed_org_a(client, two_orgs)
    before = await _snapshot(db, two_orgs.org_a)
    url = path.format(org=two_orgs.org_a)
    r = await client.request(method, url, json=body, headers=two_orgs.admin_b.headers)
    assert r.status_code == 404, r.text
    refused = r.json()
    # the platform's own refusal, not an unrouted path (whose 404 says "Not Found")
    assert refused["code"] == "not_found" and refused["message"] == "no such org", refused
    assert "shpat-victim-secret" not in r.text and "alpha" not in r.text
    assert await _snapshot(db, two_orgs.org_a) == before
    # an unknown org answers exactly the same as the victim's
    ghost = await client.request(
        method,
        path.format(org="00000000-0000-4000-8000-000000000000"),
        json=body,
        headers=two_orgs.admin_b.headers,
    )
    assert (ghost.status_code, ghost.json()) == (r.status_code, refused)
    # the positive control: the same request by the org's own admin is served (so the
    # route exists and the 404 above is the scoping refusing the other org's admin)
    own = await client.request(method, url, json=body, headers=two_orgs.admin_a.headers)
    assert own.status_code in (200, 204), own.text


async def test_another_orgs_users_see_nothing_in_listings(
    client: httpx.AsyncClient, two_orgs: TwoOrgs
) -> None:
    await _seed_org_a(client, two_orgs)
    b = two_orgs.admin_b.headers
    orgs = await client.get("/orgs", headers=b)
    assert [o["id"] for o in orgs.json()] == [two_orgs.org_b]
    audit = await client.get("/audit", headers=b)
    assert audit.status_code == 200
    assert all(item["org_id"] == two_orgs.org_b for item in audit.json()["items"])
    assert two_orgs.org_a not in audit.text
    me = await client.get("/users/me", headers=b)
    assert [o["id"] for o in me.json()["orgs"]] == [two_orgs.org_b]


async def test_creating_a_user_in_another_org_is_not_found(
    client: httpx.AsyncClient, two_orgs: TwoOrgs
) -> None:
    r = await client.post(
        "/users",
        json={
            "username": "mole",
            "password": "a-long-enough-password",
            "role": "admin",
            "org_ids": [two_orgs.org_a],
        },
        headers=two_orgs.admin_b.headers,
    )
    assert r.status_code == 404 and r.json()["code"] == "not_found"
    login = await client.post(
        "/auth/token", json={"username": "mole", "password": "a-long-enough-password"}
    )
    assert login.status_code == 401


# endpoints, the capability they need, and a role of org A lacking it
FORBIDDEN = [
    (
        "POST",
        "/users",
        {"username": "x1", "password": "a-long-enough-password", "role": "admin"},
        "users.manage",
        "expert_a",
    ),
    ("GET", "/audit", None, "audit.read", "expert_a"),
    ("PUT", "/orgs/{org}/tool-permissions/shopify", {"enabled": True}, "tools.manage", "expert_a"),
    ("GET", "/orgs/{org}/integrations", None, "tools.manage", "viewer_a"),
    (
        "PUT",
        "/orgs/{org}/integrations/shopify",
        {"credentials": {"k": "v"}},
        "tools.manage",
        "viewer_a",
    ),
    ("DELETE", "/orgs/{org}/integrations/shopify", None, "tools.manage", "viewer_a"),
]


@pytest.mark.parametrize(("method", "path", "body", "capability", "who"), FORBIDDEN)
async def test_missing_capability_is_forbidden_and_audited(
    client: httpx.AsyncClient,
    two_orgs: TwoOrgs,
    db: AsyncEngine,
    method: str,
    path: str,
    body: dict[str, Any] | None,
    capability: str,
    who: str,
) -> None:
    caller = getattr(two_orgs, who)
    url = path.format(org=two_orgs.org_a)
    r = await client.request(method, url, json=body, headers=caller.headers)
    assert r.status_code == 403, r.text
    assert r.json() == {
        "code": "forbidden",
        "message": f"capability {capability} required",
        "details": {"capability": capability},
    }
    async with db.connect() as conn:
        rows = (
            await conn.execute(
                text(
                    "SELECT actor, target, outcome, details, org_id FROM audit_log "
                    "WHERE action = 'access.denied'"
                )
            )
        ).all()
    assert len(rows) == 1
    actor, target, outcome, details, org_id = rows[0]
    assert (actor, outcome) == (caller.username, "denied")
    assert target == f"{method} {url.split('?')[0]}"
    assert details["capability"] == capability
    if "{org}" in path:
        assert str(org_id) == two_orgs.org_a
        # the org's admin can read the denial through the API
        audit = await client.get(
            "/audit", params={"action": "access.denied"}, headers=two_orgs.admin_a.headers
        )
        assert [i["actor"] for i in audit.json()["items"]] == [caller.username]
    else:
        assert org_id is None


async def test_forbidden_requests_change_nothing(
    client: httpx.AsyncClient, two_orgs: TwoOrgs, db: AsyncEngine
) -> None:
    r = await client.post(
        "/orgs", json={"slug": "sneaky", "name": "S"}, headers=two_orgs.viewer_a.headers
    )
    assert r.status_code == 403 and r.json()["code"] == "platform_admin_required"
    async with db.connect() as conn:
        count = (
            await conn.execute(text("SELECT count(*) FROM orgs WHERE slug = 'sneaky'"))
        ).scalar_one()
    assert count == 0


async def test_reading_is_allowed_to_every_role(
    client: httpx.AsyncClient, two_orgs: TwoOrgs
) -> None:
    for caller in (two_orgs.viewer_a, two_orgs.expert_a, two_orgs.admin_a):
        r = await client.get(f"/orgs/{two_orgs.org_a}/tool-permissions", headers=caller.headers)
        assert r.status_code == 200, caller.username
        assert r.json() == []


async def test_foreign_org_is_not_found_even_without_the_capability(
    client: httpx.AsyncClient, api: Api, two_orgs: TwoOrgs, db: AsyncEngine
) -> None:
    """A 403 would confirm that the org exists; membership is checked first."""
    viewer_b = await api.user(two_orgs.admin, "viewer-b", "viewer", [two_orgs.org_b])
    r = await client.put(
        f"/orgs/{two_orgs.org_a}/tool-permissions/shopify",
        json={"enabled": True},
        headers=viewer_b.headers,
    )
    assert r.status_code == 404 and r.json()["code"] == "not_found"
    own = await client.put(
        f"/orgs/{two_orgs.org_b}/tool-permissions/shopify",
        json={"enabled": True},
        headers=viewer_b.headers,
    )
    assert own.status_code == 403
    async with db.connect() as conn:
        rows = (
            await conn.execute(
                text(
                    "SELECT outcome, chain FROM audit_log WHERE action = 'access.denied' "
                    "ORDER BY id"
                )
            )
        ).all()
    assert [tuple(r) for r in rows] == [("not_found", "platform"), ("denied", two_orgs.org_b)]
