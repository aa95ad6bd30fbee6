"""Orgs and users: creation, listing, the namespace seam, memberships, the first admin."""

from __future__ import annotations

import asyncio
import uuid

import httpx
from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from platform_api.app import create_app
from platform_api.errors import Unavailable
from tests.platform.conftest import (
    ADMIN_PASSWORD,
    Api,
    RecordingNamespaces,
    TwoOrgs,
    make_settings,
)


async def test_create_org_stores_it_requests_its_namespace_and_audits(
    client: httpx.AsyncClient, api: Api, namespaces: RecordingNamespaces, db: AsyncEngine
) -> None:
    admin = await api.admin()
    r = await client.post(
        "/orgs", json={"slug": "acme-retail", "name": "Acme Retail"}, headers=admin.headers
    )
    assert r.status_code == 201
    org = r.json()
    assert org["slug"] == "acme-retail" and org["name"] == "Acme Retail"
    assert org["namespace"] == "org-acme-retail"
    assert [(ns, str(oid)) for ns, oid in namespaces.calls] == [("org-acme-retail", org["id"])]
    async with db.connect() as conn:
        row = (
            await conn.execute(text("SELECT slug, namespace FROM orgs WHERE id = :id"), org)
        ).one()
        audit = (
            await conn.execute(
                text("SELECT actor, action, chain FROM audit_log WHERE org_id = :id"), org
            )
        ).all()
    assert tuple(row) == ("acme-retail", "org-acme-retail")
    assert [tuple(a) for a in audit] == [("admin", "org.created", org["id"])]
    listed = await client.get("/orgs", headers=admin.headers)
    assert [o["id"] for o in listed.json()] == [org["id"]]
    one = await client.get(f"/orgs/{org['id']}", headers=admin.headers)
    assert one.status_code == 200 and one.json() == org


async def test_duplicate_slug_is_a_conflict(client: httpx.AsyncClient, api: Api) -> None:
    admin = await api.admin()
    await api.org(admin, "acme")
    r = await client.post("/orgs", json={"slug": "acme", "name": "Again"}, headers=admin.headers)
    assert r.status_code == 409
    assert r.json()["code"] == "conflict" and r.json()["details"] == {"slug": "acme"}


async def test_invalid_slugs_are_refused(client: httpx.AsyncClient, api: Api) -> None:
    admin = await api.admin()
    for slug in ["", "Acme", "-acme", "acme-", "a_b", "x" * 41, "acme.io"]:
        r = await client.post("/orgs", json={"slug": slug, "name": "n"}, headers=admin.headers)
        assert r.status_code == 422, slug
        assert r.json()["code"] == "validation_failed"
    r = await client.get("/orgs", headers=admin.headers)
    assert r.json() == []


async def test_orgs_are_listed_only_for_their_members(
    client: httpx.AsyncClient, two_orgs: TwoOrgs
) -> None:
    for caller, expected in [
        (two_orgs.admin, {two_orgs.org_a, two_orgs.org_b}),
        (two_orgs.admin_a, {two_orgs.org_a}),
        (two_orgs.viewer_a, {two_orgs.org_a}),
        (two_orgs.admin_b, {two_orgs.org_b}),
    ]:
        r = await client.get("/orgs", headers=caller.headers)
        assert r.status_code == 200
        assert {o["id"] for o in r.json()} == expected, caller.username


async def test_create_user_with_role_and_memberships(
    client: httpx.AsyncClient, api: Api, db: AsyncEngine
) -> None:
    admin = await api.admin()
    org = await api.org(admin, "acme")
    password = "a-long-enough-password"
    r = await client.post(
        "/users",
        json={"username": "alice", "password": password, "role": "expert", "org_ids": [org]},
        headers=admin.headers,
    )
    assert r.status_code == 201
    body = r.json()
    assert body["username"] == "alice" and body["role"] == "expert"
    assert body["org_ids"] == [org]
    assert password not in r.text and "scrypt" not in r.text and "password" not in body
    async with db.connect() as conn:
        stored = (
            await conn.execute(text("SELECT password_hash FROM users WHERE username='alice'"))
        ).scalar_one()
    assert stored.startswith("scrypt$") and password not in stored
    alice = await api.login("alice", password)
    me = (await client.get("/users/me", headers=alice)).json()
    assert me["role"] == "expert"
    assert me["capabilities"] == ["run.control", "tasks.read"]
    assert [o["id"] for o in me["orgs"]] == [org]
    # audited in the chain of each of the user's orgs, the platform's for a user of none
    other = await api.org(admin, "globex")
    for username, org_ids in (("bob", sorted([org, other])), ("carol", [])):
        user = {"username": username, "password": password, "role": "viewer", "org_ids": org_ids}
        made = await client.post("/users", json=user, headers=admin.headers)
        assert made.status_code == 201 and made.json()["org_ids"] == org_ids, made.text
    async with db.connect() as conn:
        rows = await conn.execute(
            text(
                "SELECT target, org_id, details FROM audit_log WHERE action = 'user.created' "
                "AND actor = 'admin' ORDER BY id"
            )
        )
        audited = [(target, org_id and str(org_id), details) for target, org_id, details in rows]
    expert, viewer = ({"role": role, "oidc_subject": None} for role in ("expert", "viewer"))
    assert audited == [
        ("user:alice", org, expert),
        *[("user:bob", org_id, viewer) for org_id in sorted([org, other])],
        ("user:carol", None, viewer),
    ]


async def test_create_user_refusals(client: httpx.AsyncClient, two_orgs: TwoOrgs) -> None:
    admin_a = two_orgs.admin_a
    base = {"password": "a-long-enough-password", "role": "viewer"}
    cases = [
        (
            {"username": "u1", "role": "superhero", "org_ids": [two_orgs.org_a]},
            422,
            "validation_failed",
        ),
        ({"username": "u2", "org_ids": [two_orgs.org_b]}, 404, "not_found"),
        ({"username": "viewer-a", "org_ids": [two_orgs.org_a]}, 409, "conflict"),
        ({"username": "bad name!", "org_ids": []}, 422, "validation_failed"),
        ({"username": "u3", "password": "short", "org_ids": []}, 422, "validation_failed"),
    ]
    for extra, status, code in cases:
        r = await client.post("/users", json={**base, **extra}, headers=admin_a.headers)
        assert (r.status_code, r.json()["code"]) == (status, code), extra
    me = await client.get("/users/me", headers=two_orgs.expert_a.headers)
    assert me.status_code == 200
    for name in ("u1", "u2", "u3"):
        r = await client.post(
            "/auth/token", json={"username": name, "password": "a-long-enough-password"}
        )
        assert r.status_code == 401


async def test_me_reports_capabilities_of_each_default_role(
    client: httpx.AsyncClient, api: Api, two_orgs: TwoOrgs
) -> None:
    operator = await api.user(two_orgs.admin, "op-a", "operator", [two_orgs.org_a])
    expected = {
        two_orgs.viewer_a.username: ["tasks.read"],
        # one capability for every way of deciding, run.control (0007_rules)
        two_orgs.expert_a.username: ["run.control", "tasks.read"],
        operator.username: ["run.control", "tasks.read"],
        # access.manage is the platform administrators' (0013_admins), never a role's
        two_orgs.admin_a.username: [
            "agents.manage",
            "audit.read",
            "orgs.manage",
            "policy.manage",
            "run.control",
            "tasks.read",
            "tools.manage",
            "users.manage",
        ],
    }
    for caller in (two_orgs.viewer_a, two_orgs.expert_a, operator, two_orgs.admin_a):
        r = await client.get("/users/me", headers=caller.headers)
        assert r.json()["capabilities"] == expected[caller.username]
        assert r.json()["platformAdmin"] is False
    root = (await client.get("/users/me", headers=two_orgs.admin.headers)).json()
    assert root["platformAdmin"] is True and "access.manage" in root["capabilities"]


async def test_first_admin_is_created_once(
    database_url: str, db: AsyncEngine, app: FastAPI
) -> None:
    # `app` has started once already; start a second instance on the same database
    second = create_app(make_settings(database_url, admin_password="a-different-password-99"))
    async with second.router.lifespan_context(second):
        pass
    async with db.connect() as conn:
        rows = (await conn.execute(text("SELECT role FROM users WHERE username = 'admin'"))).all()
    assert [r[0] for r in rows] == ["admin"]
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://p") as c:
        ok = await c.post("/auth/token", json={"username": "admin", "password": ADMIN_PASSWORD})
        assert ok.status_code == 200


async def test_no_admin_without_a_password(database_url: str, db: AsyncEngine) -> None:
    app = create_app(make_settings(database_url, admin_password=None))
    async with app.router.lifespan_context(app):
        pass
    async with db.connect() as conn:
        count = (await conn.execute(text("SELECT count(*) FROM users"))).scalar_one()
    assert count == 0


async def test_access_map_override_changes_capabilities(database_url: str, db: AsyncEngine) -> None:
    app = create_app(
        make_settings(database_url, access_map={"viewer": ["tasks.read", "tools.manage"]})
    )
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://p") as c,
    ):
        api = Api(c)
        admin = await api.admin()
        org = await api.org(admin, "acme")
        viewer = await api.user(admin, "vic", "viewer", [org])
        r = await c.put(
            f"/orgs/{org}/tool-permissions/shopify", json={"enabled": True}, headers=viewer.headers
        )
        assert r.status_code == 200, r.text
        me = await c.get("/users/me", headers=viewer.headers)
        assert me.json()["capabilities"] == ["tasks.read", "tools.manage"]
    async with db.connect() as conn:
        audited = (
            await conn.execute(
                text("SELECT count(*) FROM audit_log WHERE action = 'access_map.replaced'")
            )
        ).scalar_one()
    assert audited == 1


async def test_concurrent_creation_of_one_slug_yields_one_org(
    client: httpx.AsyncClient, api: Api, db: AsyncEngine
) -> None:
    admin = await api.admin()

    async def create() -> httpx.Response:
        return await client.post(
            "/orgs", json={"slug": "race", "name": "Race"}, headers=admin.headers
        )

    results = await asyncio.gather(*(create() for _ in range(6)))
    assert sorted(r.status_code for r in results) == [201] + [409] * 5
    assert {r.json()["code"] for r in results if r.status_code == 409} == {"conflict"}
    async with db.connect() as conn:
        orgs = (await conn.execute(text("SELECT count(*) FROM orgs"))).scalar_one()
        audited = (
            await conn.execute(text("SELECT count(*) FROM audit_log WHERE action='org.created'"))
        ).scalar_one()
    assert (orgs, audited) == (1, 1)


class FailingNamespaces:
    """An `OrgNamespaces` whose Kubernetes side is down."""

    async def ensure(self, namespace: str, org_id: uuid.UUID) -> None:
        raise Unavailable("cannot create the namespace", namespace=namespace)


async def test_a_failing_namespace_rolls_the_org_back(database_url: str, db: AsyncEngine) -> None:
    app = create_app(make_settings(database_url), namespaces=FailingNamespaces())
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://p") as c,
    ):
        admin = await Api(c).admin()
        r = await c.post("/orgs", json={"slug": "acme", "name": "Acme"}, headers=admin.headers)
        assert r.status_code == 503
        assert r.json() == {
            "code": "unavailable",
            "message": "cannot create the namespace",
            "details": {"namespace": "org-acme"},
        }
    async with db.connect() as conn:
        counts = [
            (await conn.execute(text(f"SELECT count(*) FROM {table}"))).scalar_one()
            for table in ("orgs", "memberships")
        ]
        audited = (
            await conn.execute(text("SELECT count(*) FROM audit_log WHERE action='org.created'"))
        ).scalar_one()
    assert counts == [0, 0] and audited == 0
