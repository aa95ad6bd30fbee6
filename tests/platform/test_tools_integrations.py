"""Tool permissions and integration credentials: storage, encryption bound to org and
type, rotation, and credentials never appearing in a response or a log line."""

from __future__ import annotations

import base64
import json
import logging
import uuid

import httpx
import pytest
from cryptography.exceptions import InvalidTag
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from platform_api.app import create_app
from platform_api.db import make_engine, make_sessionmaker
from platform_api.integrations.crypto import CredentialCipher, Sealed
from platform_api.integrations.service import reencrypt_all
from tests.platform.conftest import CREDENTIALS_KEY, Api, TwoOrgs, make_settings

SECRET = "shpat_super-secret-token-4242"


async def test_tool_permission_put_and_get(
    client: httpx.AsyncClient, two_orgs: TwoOrgs, db: AsyncEngine
) -> None:
    h, org = two_orgs.admin_a.headers, two_orgs.org_a
    r = await client.put(
        f"/orgs/{org}/tool-permissions/shopify",
        json={"enabled": True, "config": {"allowedActions": ["listOrders"], "ratePerHour": 100}},
        headers=h,
    )
    assert r.status_code == 200
    assert r.json()["tool"] == "shopify" and r.json()["enabled"] is True
    assert (
        r.json()["config"] == {"allowedActions": ["listOrders"], "ratePerHour": 100}
        and r.json()["updated_by"] == "admin-a"
    )
    r = await client.put(
        f"/orgs/{org}/tool-permissions/shopify", json={"enabled": False}, headers=h
    )
    assert r.json()["enabled"] is False and r.json()["config"] == {}
    await client.put(f"/orgs/{org}/tool-permissions/amazon", json={"enabled": True}, headers=h)
    listed = await client.get(f"/orgs/{org}/tool-permissions", headers=two_orgs.viewer_a.headers)
    assert [(p["tool"], p["enabled"]) for p in listed.json()] == [
        ("amazon", True),
        ("shopify", False),
    ]
    other = await client.get(
        f"/orgs/{two_orgs.org_b}/tool-permissions", headers=two_orgs.admin_b.headers
    )
    assert other.json() == []
    async with db.connect() as conn:
        details = (
            await conn.execute(
                text(
                    "SELECT details FROM audit_log WHERE action = 'tool_permission.updated' "
                    "AND target = 'tool:shopify' ORDER BY seq"
                )
            )
        ).scalars()
        assert [(d["enabled"], d["previously_enabled"]) for d in details] == [
            (True, None),
            (False, True),
        ]


async def test_tool_permission_validation(client: httpx.AsyncClient, two_orgs: TwoOrgs) -> None:
    h, org = two_orgs.admin_a.headers, two_orgs.org_a
    for tool, body in [
        ("Bad Name", {"enabled": True}),
        ("shopify", {"enabled": "maybe"}),
        ("shopify", {}),
        ("shopify", {"enabled": True, "extra": 1}),
    ]:
        r = await client.put(f"/orgs/{org}/tool-permissions/{tool}", json=body, headers=h)
        assert r.status_code == 422 and r.json()["code"] == "validation_failed", (tool, body)
    # only tools of the action catalog; an alias names its tool
    r = await client.put(f"/orgs/{org}/tool-permissions/stripe", json={"enabled": True}, headers=h)
    assert r.status_code == 404 and r.json()["code"] == "unknown_tool", r.text
    assert (await client.get(f"/orgs/{org}/tool-permissions", headers=h)).json() == []
    r = await client.put(
        f"/orgs/{org}/tool-permissions/shopify_query", json={"enabled": True}, headers=h
    )
    assert r.status_code == 200 and r.json()["tool"] == "shopify", r.text


async def test_credentials_are_stored_encrypted_and_bound_to_org_and_type(
    client: httpx.AsyncClient, two_orgs: TwoOrgs, db: AsyncEngine
) -> None:
    h, org = two_orgs.admin_a.headers, two_orgs.org_a
    r = await client.put(
        f"/orgs/{org}/integrations/shopify",
        json={"credentials": {"shop": "acme.myshopify.com", "access_token": SECRET}},
        headers=h,
    )
    assert r.status_code == 200
    assert r.json()["type"] == "shopify" and r.json()["updated_by"] == "admin-a"
    assert SECRET not in r.text and "acme.myshopify.com" not in r.text
    async with db.connect() as conn:
        row = (
            await conn.execute(
                text("SELECT key_id, nonce, ciphertext FROM integration_credentials")
            )
        ).one()
    key_id, nonce, ciphertext = row
    assert key_id == "k1" and len(nonce) == 12
    assert SECRET.encode() not in ciphertext
    cipher = CredentialCipher({"k1": base64.b64decode(CREDENTIALS_KEY)}, "k1")
    sealed = Sealed(key_id, bytes(nonce), bytes(ciphertext))
    plain = json.loads(cipher.open(uuid.UUID(org), "shopify", sealed))
    assert plain == {"shop": "acme.myshopify.com", "access_token": SECRET}
    with pytest.raises(InvalidTag):
        cipher.open(uuid.UUID(two_orgs.org_b), "shopify", sealed)
    with pytest.raises(InvalidTag):
        cipher.open(uuid.UUID(org), "amazon", sealed)
    listed = await client.get(f"/orgs/{org}/integrations", headers=h)
    assert [i["type"] for i in listed.json()] == ["shopify"]
    assert SECRET not in listed.text


async def test_credentials_replace_and_delete(
    client: httpx.AsyncClient, two_orgs: TwoOrgs, db: AsyncEngine
) -> None:
    h, org = two_orgs.admin_a.headers, two_orgs.org_a
    url = f"/orgs/{org}/integrations/amazon"
    for value in ("first-secret-value", "second-secret-value"):
        assert (
            await client.put(url, json={"credentials": {"key": value}}, headers=h)
        ).status_code == 200
    async with db.connect() as conn:
        assert (
            await conn.execute(text("SELECT count(*) FROM integration_credentials"))
        ).scalar_one() == 1
    r = await client.delete(url, headers=h)
    assert r.status_code == 204 and r.content == b""
    again = await client.delete(url, headers=h)
    assert again.status_code == 404 and again.json()["code"] == "not_found"
    assert (await client.get(f"/orgs/{org}/integrations", headers=h)).json() == []
    async with db.connect() as conn:
        actions = (
            await conn.execute(
                text(
                    "SELECT action, details FROM audit_log WHERE target = 'integration:amazon' "
                    "ORDER BY seq"
                )
            )
        ).all()
    assert [a for a, _ in actions] == [
        "integration.updated",
        "integration.updated",
        "integration.deleted",
    ]
    assert "secret-value" not in json.dumps([d for _, d in actions])


async def test_credentials_validation(client: httpx.AsyncClient, two_orgs: TwoOrgs) -> None:
    h, org = two_orgs.admin_a.headers, two_orgs.org_a
    for kind, body in [
        ("shopify", {"credentials": {}}),
        ("shopify", {"credentials": "flat"}),
        ("Shop Ify", {"credentials": {"a": "b"}}),
        ("shopify", {"credentials": {"a": "b"}, "key_id": "mine"}),
    ]:
        r = await client.put(f"/orgs/{org}/integrations/{kind}", json=body, headers=h)
        assert r.status_code == 422 and r.json()["code"] == "validation_failed", body


async def test_credentials_without_keys_are_unavailable(database_url: str) -> None:
    app = create_app(make_settings(database_url, credentials_keys={}, credentials_active_key=None))
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://p") as c,
    ):
        api = Api(c)
        admin = await api.admin()
        org = await api.org(admin, "acme")
        r = await c.put(
            f"/orgs/{org}/integrations/shopify",
            json={"credentials": {"token": SECRET}},
            headers=admin.headers,
        )
        assert r.status_code == 503 and r.json()["code"] == "unavailable"
        assert SECRET not in r.text


async def test_rotation_reencrypts_under_the_active_key(
    client: httpx.AsyncClient, two_orgs: TwoOrgs, database_url: str, db: AsyncEngine
) -> None:
    h, org = two_orgs.admin_a.headers, two_orgs.org_a
    await client.put(
        f"/orgs/{org}/integrations/shopify", json={"credentials": {"t": SECRET}}, headers=h
    )
    new_key = bytes(range(100, 132))
    cipher = CredentialCipher({"k1": base64.b64decode(CREDENTIALS_KEY), "k2": new_key}, "k2")
    engine = make_engine(database_url)
    try:
        async with make_sessionmaker(engine)() as session, session.begin():
            assert await reencrypt_all(session, cipher) == 1
        async with make_sessionmaker(engine)() as session, session.begin():
            assert await reencrypt_all(session, cipher) == 0
    finally:
        await engine.dispose()
    async with db.connect() as conn:
        key_id, nonce, ciphertext = (
            await conn.execute(
                text("SELECT key_id, nonce, ciphertext FROM integration_credentials")
            )
        ).one()
    assert key_id == "k2"
    only_new = CredentialCipher({"k2": new_key}, "k2")
    sealed = Sealed(key_id, bytes(nonce), bytes(ciphertext))
    assert json.loads(only_new.open(uuid.UUID(org), "shopify", sealed)) == {"t": SECRET}


def test_cipher_refuses_bad_keys() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        CredentialCipher({"k": b"short"}, "k")
    with pytest.raises(ValueError, match="not among"):
        CredentialCipher({"k": bytes(32)}, "other")


async def test_no_credential_in_any_response_or_log(
    client: httpx.AsyncClient, api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    logging.getLogger("sqlalchemy.engine").setLevel(logging.INFO)  # log every statement
    try:
        bodies: list[str] = []
        admin = await api.admin()
        org = await api.org(admin, "acme")
        user_password = "user-password-never-logged-77"
        r = await client.post(
            "/users",
            json={"username": "u", "password": user_password, "role": "admin", "org_ids": [org]},
            headers=admin.headers,
        )
        bodies.append(r.text)
        for path in ("shopify", "amazon"):
            r = await client.put(
                f"/orgs/{org}/integrations/{path}",
                json={"credentials": {"token": SECRET, "other": SECRET + "-b"}},
                headers=admin.headers,
            )
            assert r.status_code == 200
            bodies.append(r.text)
        r = await client.put(
            f"/orgs/{org}/integrations/shopify",
            json={"credentials": {"token": SECRET}, "bogus": SECRET},
            headers=admin.headers,
        )
        assert r.status_code == 422
        bodies.append(r.text)
        bad_login = await client.post(
            "/auth/token", json={"username": "u", "password": "wrong-" + user_password}
        )
        bodies.append(bad_login.text)
        for path in ("/audit?limit=500", f"/orgs/{org}/integrations", "/users/me", "/orgs"):
            bodies.append((await client.get(path, headers=admin.headers)).text)
        bodies.append((await client.get("/openapi.json")).text)
    finally:
        logging.getLogger("sqlalchemy.engine").setLevel(logging.WARNING)
    assert any("INSERT INTO integration_credentials" in m for m in caplog.messages)
    for secret in (SECRET, user_password, "wrong-" + user_password, CREDENTIALS_KEY):
        for body in bodies:
            assert secret not in body
        assert secret not in caplog.text
