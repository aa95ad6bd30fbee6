"""Binding existing users to their OIDC identity (issuer and `sub`), and who may do it:
binding an identity hands the user over, so an admin binds only users of their own orgs."""

from __future__ import annotations

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from platform_api.settings import Settings
from tests.platform.conftest import TwoOrgs, make_settings
from tests.platform.test_auth import (  # noqa: F401 (fixtures)
    OIDC_ISSUER,
    JwksServer,
    bearer,
    jwks_server,
    oidc_key,
    oidc_token,
)


@pytest.fixture
def settings(database_url: str, jwks_server: JwksServer) -> Settings:  # noqa: F811
    return make_settings(
        database_url,
        oidc_jwks_url=jwks_server.url,
        oidc_issuer=OIDC_ISSUER,
        oidc_audience="humanwork-experts",
    )


def _identity(subject: str) -> dict[str, str]:
    return {"oidc_issuer": OIDC_ISSUER, "oidc_subject": subject}


async def test_an_admin_binds_a_user_of_their_org_and_no_other(
    client: httpx.AsyncClient,
    two_orgs: TwoOrgs,
    oidc_key: rsa.RSAPrivateKey,  # noqa: F811
    db: AsyncEngine,
) -> None:
    token = oidc_token(oidc_key, sub="sub-expert-a", preferred_username="whatever")
    assert (await client.get("/users/me", headers=bearer(token))).status_code == 401
    # org B's admin cannot reach org A's expert; nobody can take over the root admin
    # (a member of both orgs) from one org
    for caller, username in ((two_orgs.admin_b, "expert-a"), (two_orgs.admin_a, "admin")):
        r = await client.put(
            f"/users/{username}/oidc-identity",
            json=_identity("sub-expert-a"),
            headers=caller.headers,
        )
        assert r.status_code == 404 and r.json()["code"] == "not_found", (caller, username)
    # nor can an expert (no users.manage)
    r = await client.put(
        "/users/viewer-a/oidc-identity",
        json=_identity("sub-expert-a"),
        headers=two_orgs.expert_a.headers,
    )
    assert r.status_code == 403
    assert (await client.get("/users/me", headers=bearer(token))).status_code == 401
    r = await client.put(
        "/users/expert-a/oidc-identity",
        json=_identity("sub-expert-a"),
        headers=two_orgs.admin_a.headers,
    )
    assert r.status_code == 200, r.text
    assert r.json()["oidc_subject"] == "sub-expert-a"
    me = await client.get("/users/me", headers=bearer(token))
    assert me.status_code == 200 and me.json()["username"] == "expert-a"
    # the identity is one user's
    r = await client.put(
        "/users/viewer-a/oidc-identity",
        json=_identity("sub-expert-a"),
        headers=two_orgs.admin_a.headers,
    )
    assert r.status_code == 409
    # the one binding done is audited in the chain of the user's org
    async with db.connect() as conn:
        rows = await conn.execute(
            text("SELECT actor, target, org_id, details FROM audit_log WHERE action = :a"),
            {"a": "user.oidc_bound"},
        )
        audited = [(actor, target, str(org), details) for actor, target, org, details in rows]
    assert audited == [("admin-a", "user:expert-a", two_orgs.org_a, _identity("sub-expert-a"))]
