"""Two levels of administration, from the attacker's side: an org's admin cannot change
platform-wide settings (the access map, orgs, platform administrators), cannot reach
another org's users, cannot give a role above its own or one the platform keeps from
orgs; roles are per membership; a removed or deactivated user's tokens are refused at
its next request. Each refusal beside the same request from the legitimate party."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.platform.conftest import Api, Caller, TwoOrgs


async def _count(db: AsyncEngine, sql: str, **params: Any) -> int:
    async with db.connect() as conn:
        return int((await conn.execute(text(sql), params)).scalar_one())


async def _map(client: httpx.AsyncClient, caller: Caller) -> dict[str, list[str]]:
    r = await client.get("/access-map", headers=caller.headers)
    assert r.status_code == 200, r.text
    roles: dict[str, list[str]] = r.json()["roles"]
    return roles


def _refused(r: httpx.Response, status: int, code: str) -> None:
    assert r.status_code == status, r.text
    assert r.json()["code"] == code, r.text


async def test_an_org_admin_cannot_replace_the_platform_wide_access_map(
    client: httpx.AsyncClient, two_orgs: TwoOrgs, db: AsyncEngine
) -> None:
    root, admin_a = two_orgs.admin, two_orgs.admin_a
    before = await _map(client, root)
    # org A's admin would give every viewer (of org B too) the power to decide
    wider = {**before, "viewer": ["run.control", "tasks.read"]}
    _refused(
        await client.put("/access-map", json={"roles": wider}, headers=admin_a.headers),
        403,
        "platform_admin_required",
    )
    _refused(
        await client.get("/access-map", headers=admin_a.headers), 403, "platform_admin_required"
    )
    assert await _map(client, root) == before
    assert await _count(db, "SELECT count(*) FROM audit_log WHERE action='access_map.changed'") == 0
    # positive control: a platform administrator changes it
    r = await client.put("/access-map", json={"roles": wider}, headers=root.headers)
    assert r.status_code == 200 and r.json()["roles"] == wider, r.text
    assert await _count(db, "SELECT count(*) FROM audit_log WHERE action='access_map.changed'") == 1


async def test_an_org_admin_cannot_create_orgs_or_platform_admins(
    client: httpx.AsyncClient, two_orgs: TwoOrgs, db: AsyncEngine
) -> None:
    root, admin_a = two_orgs.admin, two_orgs.admin_a
    r = await client.post("/orgs", json={"slug": "sneaky", "name": "S"}, headers=admin_a.headers)
    _refused(r, 403, "platform_admin_required")
    assert await _count(db, "SELECT count(*) FROM orgs WHERE slug='sneaky'") == 0
    for target in ("admin-a", "admin-b"):
        r = await client.put(
            f"/users/{target}/platform-admin", json={"platformAdmin": True}, headers=admin_a.headers
        )
        _refused(r, 403, "platform_admin_required")
    assert await _count(db, "SELECT count(*) FROM users WHERE platform_admin") == 1
    # positive control: a platform administrator does both; the new one changes the map
    r = await client.post("/orgs", json={"slug": "legit", "name": "L"}, headers=root.headers)
    assert r.status_code == 201, r.text
    r = await client.put(
        "/users/admin-b/platform-admin", json={"platformAdmin": True}, headers=root.headers
    )
    assert r.status_code == 200 and r.json()["platformAdmin"] is True, r.text
    assert (await client.get("/access-map", headers=two_orgs.admin_b.headers)).status_code == 200
    # nobody takes its own platform administration away (one always remains)
    r = await client.put(
        "/users/admin/platform-admin", json={"platformAdmin": False}, headers=root.headers
    )
    _refused(r, 409, "conflict")


async def test_roles_are_per_membership(
    client: httpx.AsyncClient, api: Api, two_orgs: TwoOrgs
) -> None:
    root, org_a, org_b = two_orgs.admin, two_orgs.org_a, two_orgs.org_b
    dual = await api.user(root, "dual", "admin", [org_a])
    # B's admin cannot pull A's user into B; a platform administrator adds it as a viewer
    join = {"role": "viewer"}
    r = await client.put(f"/orgs/{org_b}/members/dual", json=join, headers=two_orgs.admin_b.headers)
    _refused(r, 404, "not_found")
    r = await client.put(f"/orgs/{org_b}/members/dual", json=join, headers=root.headers)
    assert r.status_code == 200 and r.json()["role"] == "viewer", r.text
    me = (await client.get("/users/me", headers=dual.headers)).json()
    assert me["roles"] == {org_a: "admin", org_b: "viewer"} and me["platformAdmin"] is False
    # admin of A: manages A's tools; viewer of B: refused there
    grant = {"enabled": True}
    r = await client.put(
        f"/orgs/{org_a}/tool-permissions/shopify", json=grant, headers=dual.headers
    )
    assert r.status_code == 200, r.text
    r = await client.put(
        f"/orgs/{org_b}/tool-permissions/shopify", json=grant, headers=dual.headers
    )
    _refused(r, 403, "forbidden")
    assert (await client.get(f"/orgs/{org_b}/tool-permissions", headers=root.headers)).json() == []
    # a capability held in A only reaches A's records: B's audit log stays closed
    assert (
        await client.get("/audit", params={"org": org_a}, headers=dual.headers)
    ).status_code == 200
    r = await client.get("/audit", params={"org": org_b}, headers=dual.headers)
    assert r.status_code == 404, r.text
    # nor can it add a user to B, or give itself B's admin role
    body = {"username": "sneak", "password": "a-long-enough-password", "role": "viewer"}
    r = await client.post("/users", json={**body, "org_ids": [org_b]}, headers=dual.headers)
    _refused(r, 404, "not_found")
    r = await client.put(
        f"/orgs/{org_b}/members/dual", json={"role": "admin"}, headers=dual.headers
    )
    _refused(r, 403, "forbidden")
    r = await client.post("/users", json={**body, "org_ids": [org_a]}, headers=dual.headers)
    assert r.status_code == 201, r.text


async def test_an_org_admin_cannot_reach_another_orgs_users(
    client: httpx.AsyncClient, two_orgs: TwoOrgs, db: AsyncEngine
) -> None:
    admin_a, org_a, org_b = two_orgs.admin_a.headers, two_orgs.org_a, two_orgs.org_b
    attempts = [
        ("PUT", f"/orgs/{org_a}/members/admin-b", {"role": "viewer"}),
        ("PUT", f"/orgs/{org_b}/members/admin-b", {"role": "viewer"}),
        ("DELETE", f"/orgs/{org_a}/members/admin-b", None),
        ("DELETE", f"/orgs/{org_b}/members/admin-b", None),
        ("GET", f"/orgs/{org_b}/members", None),
        ("POST", "/users/admin-b/deactivate", None),
        ("PUT", "/users/admin-b/oidc-identity", {"oidc_issuer": "i", "oidc_subject": "s"}),
    ]
    for method, path, body in attempts:
        r = await client.request(method, path, json=body, headers=admin_a)
        _refused(r, 404, "not_found")
    # admin-b is untouched: still admin of B, active
    me = await client.get("/users/me", headers=two_orgs.admin_b.headers)
    assert me.status_code == 200 and me.json()["roles"] == {org_b: "admin"}
    changes = "SELECT count(*) FROM audit_log WHERE action LIKE 'member.%' OR action LIKE 'user.%'"
    before = await _count(db, changes)
    # positive control: its own member's role, changed by org A's admin
    r = await client.put(
        f"/orgs/{org_a}/members/viewer-a", json={"role": "expert"}, headers=admin_a
    )
    assert r.status_code == 200 and r.json()["role"] == "expert", r.text
    me = (await client.get("/users/me", headers=two_orgs.viewer_a.headers)).json()
    assert me["roles"] == {org_a: "expert"} and "run.control" in me["capabilities"]
    assert await _count(db, changes) == before + 1
    listed = (await client.get(f"/orgs/{org_a}/members", headers=admin_a)).json()
    assert {m["username"]: m["role"] for m in listed}["viewer-a"] == "expert"


async def test_an_org_admin_gives_no_role_above_its_own_nor_one_kept_from_orgs(
    client: httpx.AsyncClient, api: Api, two_orgs: TwoOrgs, db: AsyncEngine
) -> None:
    root, org_a = two_orgs.admin, two_orgs.org_a
    roles = await _map(client, root)
    roles["manager"] = ["org.grantable", "tasks.read", "users.manage"]
    roles["auditor"] = ["audit.read", "tasks.read"]  # not org.grantable: the platform's to give
    r = await client.put("/access-map", json={"roles": roles}, headers=root.headers)
    assert r.status_code == 200, r.text
    manager = await api.user(root, "manager-a", "manager", [org_a])
    body = {"password": "a-long-enough-password", "org_ids": [org_a]}
    for role in ("expert", "admin", "auditor"):
        r = await client.post(
            "/users", json={**body, "username": f"x-{role}", "role": role}, headers=manager.headers
        )
        _refused(r, 403, "role_not_grantable")
        r = await client.put(
            f"/orgs/{org_a}/members/viewer-a", json={"role": role}, headers=manager.headers
        )
        _refused(r, 403, "role_not_grantable")
    # nor demote, remove or deactivate a member above it
    for method, path, payload in [
        ("PUT", f"/orgs/{org_a}/members/expert-a", {"role": "viewer"}),
        ("DELETE", f"/orgs/{org_a}/members/expert-a", None),
        ("POST", "/users/expert-a/deactivate", None),
    ]:
        r = await client.request(method, path, json=payload, headers=manager.headers)
        _refused(r, 403, "role_not_grantable")
    # an org's full admin cannot give the role the platform keeps, either
    r = await client.put(
        f"/orgs/{org_a}/members/viewer-a",
        json={"role": "auditor"},
        headers=two_orgs.admin_a.headers,
    )
    _refused(r, 403, "role_not_grantable")
    assert await _count(db, "SELECT count(*) FROM users WHERE username LIKE 'x-%'") == 0
    roles_now = "SELECT username, memberships.role FROM memberships JOIN users ON id = user_id"
    async with db.connect() as conn:
        held = {r[0]: r[1] for r in (await conn.execute(text(roles_now))).all()}
    assert (held["viewer-a"], held["expert-a"]) == ("viewer", "expert")
    # positive controls: within its own capabilities it gives; the platform gives auditor
    r = await client.post(
        "/users", json={**body, "username": "x-viewer", "role": "viewer"}, headers=manager.headers
    )
    assert r.status_code == 201, r.text
    r = await client.put(
        f"/orgs/{org_a}/members/viewer-a", json={"role": "auditor"}, headers=root.headers
    )
    assert r.status_code == 200, r.text
    # and no role may hold the platform administrator's capability
    roles["viewer"] = ["access.manage", "tasks.read"]
    r = await client.put("/access-map", json={"roles": roles}, headers=root.headers)
    _refused(r, 422, "platform_capability")


async def test_a_removed_members_token_is_refused_on_the_org_at_once(
    client: httpx.AsyncClient, two_orgs: TwoOrgs, db: AsyncEngine
) -> None:
    org_a, expert = two_orgs.org_a, two_orgs.expert_a
    assert (await client.get(f"/orgs/{org_a}", headers=expert.headers)).status_code == 200
    r = await client.delete(f"/orgs/{org_a}/members/expert-a", headers=two_orgs.admin_a.headers)
    assert r.status_code == 204, r.text
    # the same token, at its next request
    _refused(await client.get(f"/orgs/{org_a}", headers=expert.headers), 404, "not_found")
    assert (await client.get("/orgs", headers=expert.headers)).json() == []
    r = await client.get(f"/orgs/{org_a}/tool-permissions", headers=expert.headers)
    _refused(r, 404, "not_found")
    removed = "SELECT count(*) FROM audit_log WHERE action='member.removed' AND org_id=:o"
    assert await _count(db, removed, o=org_a) == 1
    # the rest of the org answers as before
    assert (
        await client.get(f"/orgs/{org_a}", headers=two_orgs.viewer_a.headers)
    ).status_code == 200


async def test_a_deactivated_users_tokens_are_refused_until_reactivated(
    client: httpx.AsyncClient, two_orgs: TwoOrgs
) -> None:
    viewer, admin_a = two_orgs.viewer_a, two_orgs.admin_a
    # neither a member without users.manage nor another org's admin
    for caller in (two_orgs.expert_a, two_orgs.admin_b):
        r = await client.post("/users/viewer-a/deactivate", headers=caller.headers)
        _refused(r, 404, "not_found")
    assert (await client.get("/users/me", headers=viewer.headers)).status_code == 200
    r = await client.post("/users/viewer-a/deactivate", headers=admin_a.headers)
    assert r.status_code == 200 and r.json()["active"] is False, r.text
    for path in ("/users/me", "/orgs", f"/orgs/{two_orgs.org_a}"):
        _refused(await client.get(path, headers=viewer.headers), 401, "user_deactivated")
    assert (await client.get("/users/me", headers=two_orgs.expert_a.headers)).status_code == 200
    # nobody deactivates itself (so a platform administrator always remains)
    _refused(
        await client.post("/users/admin/deactivate", headers=two_orgs.admin.headers),
        409,
        "conflict",
    )
    r = await client.post("/users/viewer-a/reactivate", headers=admin_a.headers)
    assert r.status_code == 200 and r.json()["active"] is True, r.text
    assert (await client.get("/users/me", headers=viewer.headers)).status_code == 200


async def test_a_deactivated_user_gets_no_token_at_sign_in(
    client: httpx.AsyncClient, two_orgs: TwoOrgs
) -> None:
    login = {"username": "viewer-a", "password": two_orgs.viewer_a.password}
    assert (await client.post("/auth/token", json=login)).status_code == 200
    r = await client.post("/users/viewer-a/deactivate", headers=two_orgs.admin_a.headers)
    assert r.status_code == 200, r.text
    refused = await client.post("/auth/token", json=login)
    _refused(refused, 401, "user_deactivated")
    assert "access_token" not in refused.text
    # a wrong password says nothing more than for anyone else
    wrong = await client.post("/auth/token", json={**login, "password": "not-it"})
    _refused(wrong, 401, "unauthenticated")
    # positive control: reactivated, the same sign-in gets a token that works
    r = await client.post("/users/viewer-a/reactivate", headers=two_orgs.admin_a.headers)
    assert r.status_code == 200, r.text
    token = (await client.post("/auth/token", json=login)).json()["access_token"]
    me = await client.get("/users/me", headers={"Authorization": f"Bearer {token}"})
    assert me.status_code == 200, me.text


async def test_a_platform_admin_manages_an_org_it_left_or_was_demoted_in(
    client: httpx.AsyncClient, two_orgs: TwoOrgs, db: AsyncEngine
) -> None:
    root, org_a = two_orgs.admin, two_orgs.org_a
    members = f"/orgs/{org_a}/members"
    # the platform administrator demotes itself in org A (it is a member there) ...
    assert (
        await client.put(f"{members}/admin", json={"role": "viewer"}, headers=root.headers)
    ).status_code == 200
    # ... and still manages the org's members; an org admin of another org does not
    r = await client.get(members, headers=root.headers)
    assert r.status_code == 200 and {m["username"] for m in r.json()} >= {"admin-a", "expert-a"}
    _refused(await client.get(members, headers=two_orgs.admin_b.headers), 404, "not_found")
    _refused(await client.get(members, headers=two_orgs.expert_a.headers), 403, "forbidden")
    r = await client.put(f"{members}/expert-a", json={"role": "admin"}, headers=root.headers)
    assert r.status_code == 200 and r.json()["role"] == "admin", r.text
    # it leaves the org altogether: still manages it, and an org that does not exist is 404
    assert (await client.delete(f"{members}/admin", headers=root.headers)).status_code == 204
    r = await client.put(f"{members}/admin", json={"role": "admin"}, headers=root.headers)
    assert r.status_code == 200 and r.json()["role"] == "admin", r.text
    ghost = "/orgs/00000000-0000-4000-8000-000000000000/members"
    _refused(await client.get(ghost, headers=root.headers), 404, "not_found")
    changed = "SELECT count(*) FROM audit_log WHERE action='member.role_changed' AND org_id=:o"
    assert await _count(db, changed, o=org_a) == 2
