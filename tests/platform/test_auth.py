"""Logging in and bearer tokens: the built-in issuer, refusals of bad tokens, and an
external OIDC issuer served from a local JWKS."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from platform_api.app import create_app
from tests.platform.conftest import ADMIN_PASSWORD, JWT_SECRET, Api, TwoOrgs, make_settings


def local_claims(**overrides: Any) -> dict[str, Any]:
    now = datetime.now(UTC)
    claims: dict[str, Any] = {
        "sub": "admin",
        "role": "admin",
        "iat": now,
        "nbf": now,
        "exp": now + timedelta(minutes=5),
        "iss": "humanwork-platform",
        "aud": "humanwork-platform",
        "jti": uuid.uuid4().hex,
    }
    claims.update(overrides)
    return {k: v for k, v in claims.items() if v is not None}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_login_issues_a_signed_token_with_the_expected_claims(
    client: httpx.AsyncClient,
) -> None:
    r = await client.post("/auth/token", json={"username": "admin", "password": ADMIN_PASSWORD})
    assert r.status_code == 200
    body = r.json()
    assert body["token_type"] == "bearer"
    claims = jwt.decode(
        body["access_token"],
        JWT_SECRET,
        algorithms=["HS256"],
        audience="humanwork-platform",
        issuer="humanwork-platform",
    )
    assert claims["sub"] == "admin" and claims["role"] == "admin"
    assert {"exp", "iat", "jti"} <= claims.keys()
    assert "orgs" not in claims and "org_ids" not in claims
    assert abs(claims["exp"] - datetime.fromisoformat(body["expires_at"]).timestamp()) < 2
    me = await client.get("/users/me", headers=bearer(body["access_token"]))
    assert me.status_code == 200 and me.json()["username"] == "admin"


async def test_two_logins_get_distinct_token_ids(client: httpx.AsyncClient) -> None:
    ids = set()
    for _ in range(2):
        r = await client.post("/auth/token", json={"username": "admin", "password": ADMIN_PASSWORD})
        ids.add(jwt.decode(r.json()["access_token"], options={"verify_signature": False})["jti"])
    assert len(ids) == 2


@pytest.mark.parametrize(
    ("username", "password"),
    [("admin", "wrong-password"), ("nobody", "whatever-password"), ("admin", "")],
)
async def test_wrong_credentials_are_refused_alike(
    client: httpx.AsyncClient, db: AsyncEngine, username: str, password: str
) -> None:
    r = await client.post("/auth/token", json={"username": username, "password": password})
    if password == "":
        assert r.status_code == 422 and r.json()["code"] == "validation_failed"
        return
    assert r.status_code == 401
    assert r.json() == {
        "code": "unauthenticated",
        "message": "wrong username or password",
        "details": {},
    }
    async with db.connect() as conn:
        rows = (
            await conn.execute(text("SELECT action FROM audit_log WHERE action LIKE 'auth.%'"))
        ).all()
    assert rows == []  # a single guess is not audited (a lockout is: test_login_throttle.py)


def forge(claims: dict[str, Any], key: str = JWT_SECRET, alg: str = "HS256") -> str:
    return jwt.encode(claims, key, algorithm=alg)


def unsigned(claims: dict[str, Any]) -> str:
    import base64

    def part(data: dict[str, Any]) -> str:
        raw = json.dumps(data, default=lambda d: int(d.timestamp())).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(claims)}."


BAD_TOKENS = {
    "expired": lambda: forge(
        local_claims(
            iat=datetime.now(UTC) - timedelta(hours=2),
            nbf=datetime.now(UTC) - timedelta(hours=2),
            exp=datetime.now(UTC) - timedelta(hours=1),
        )
    ),
    "forged signature": lambda: forge(local_claims(), key="not-the-platform-secret-0123456789"),
    "wrong audience": lambda: forge(local_claims(aud="some-other-service")),
    "wrong issuer": lambda: forge(local_claims(iss="https://evil.example")),
    "alg none": lambda: unsigned(local_claims()),
    "not yet valid": lambda: forge(local_claims(nbf=datetime.now(UTC) + timedelta(hours=1))),
    "no expiry": lambda: forge(local_claims(exp=None)),
    "no jti": lambda: forge(local_claims(jti=None)),
    "unknown user": lambda: forge(local_claims(sub="ghost")),
    "garbage": lambda: "not.a.jwt",
    "tampered payload": lambda: _tamper(forge(local_claims(sub="viewer-a", role="viewer"))),
}


def _tamper(token: str) -> str:
    import base64

    header, payload, sig = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["sub"], claims["role"] = "admin", "admin"
    raw = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    return f"{header}.{raw}.{sig}"


@pytest.mark.parametrize("kind", sorted(BAD_TOKENS))
async def test_bad_tokens_are_refused(client: httpx.AsyncClient, kind: str) -> None:
    # the same claims, validly signed, are accepted: only the defect makes the difference
    good = await client.get("/users/me", headers=bearer(forge(local_claims())))
    assert good.status_code == 200
    r = await client.get("/users/me", headers=bearer(BAD_TOKENS[kind]()))
    assert r.status_code == 401, r.text
    assert r.json()["code"] == "unauthenticated"
    assert r.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Basic YWRtaW46eA=="}, {"Authorization": "Bearer"}]
)
async def test_missing_bearer_token_is_refused(
    client: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    r = await client.get("/orgs", headers=headers)
    assert r.status_code == 401
    assert r.json()["code"] == "unauthenticated"


async def test_memberships_and_role_are_looked_up_per_request(
    client: httpx.AsyncClient, api: Api, two_orgs: TwoOrgs, db: AsyncEngine
) -> None:
    viewer = two_orgs.viewer_a
    r = await client.get("/orgs", headers=viewer.headers)
    assert [o["id"] for o in r.json()] == [two_orgs.org_a]
    async with db.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO memberships (user_id, org_id, role) "
                "SELECT id, CAST(:org AS uuid), 'viewer' FROM users WHERE username = 'viewer-a'"
            ),
            {"org": two_orgs.org_b},
        )
        # the role is the membership's: expert in A, viewer in B
        await conn.execute(
            text(
                "UPDATE memberships SET role = 'expert' WHERE org_id = CAST(:org AS uuid) "
                "AND user_id = (SELECT id FROM users WHERE username = 'viewer-a')"
            ),
            {"org": two_orgs.org_a},
        )
    r = await client.get("/orgs", headers=viewer.headers)  # the same token as before
    assert sorted(o["id"] for o in r.json()) == sorted([two_orgs.org_a, two_orgs.org_b])
    me = (await client.get("/users/me", headers=viewer.headers)).json()
    assert me["roles"] == {two_orgs.org_a: "expert", two_orgs.org_b: "viewer"}
    assert "run.control" in me["capabilities"]


# --- external OIDC issuer through a JWKS served locally --------------------------------


class JwksServer:
    """A tiny HTTP server publishing one JWKS document."""

    def __init__(self, jwks: dict[str, Any]) -> None:
        body = json.dumps(jwks).encode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/jwks.json"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> JwksServer:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


OIDC_ISSUER = "https://idp.example.test"


@pytest.fixture
def oidc_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def jwks_server(oidc_key: rsa.RSAPrivateKey) -> Iterator[JwksServer]:
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(oidc_key.public_key()))
    jwk.update({"kid": "idp-key-1", "use": "sig", "alg": "RS256"})
    with JwksServer({"keys": [jwk]}) as server:
        yield server


def oidc_token(key: rsa.RSAPrivateKey, kid: str = "idp-key-1", **overrides: Any) -> str:
    now = datetime.now(UTC)
    claims: dict[str, Any] = {
        "sub": "00u1abcd",
        "preferred_username": "admin",
        "iss": OIDC_ISSUER,
        "aud": "humanwork-experts",
        "iat": now,
        "exp": now + timedelta(minutes=5),
    }
    claims.update(overrides)
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": kid})


async def test_oidc_tokens_are_verified_against_the_jwks(
    database_url: str, jwks_server: JwksServer, oidc_key: rsa.RSAPrivateKey
) -> None:
    settings = make_settings(
        database_url,
        oidc_jwks_url=jwks_server.url,
        oidc_issuer=OIDC_ISSUER,
        oidc_audience="humanwork-experts",
    )
    app = create_app(settings)
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://p") as c,
    ):
        await _oidc_user(c, "idp-admin", "admin", "00u1abcd")
        ok = await c.get("/users/me", headers=bearer(oidc_token(oidc_key)))
        assert ok.status_code == 200, ok.text
        assert ok.json()["username"] == "idp-admin"
        refused = {
            "other key, same kid": oidc_token(other_key),
            "unknown kid": oidc_token(oidc_key, kid="idp-key-2"),
            "wrong audience": oidc_token(oidc_key, aud="humanwork-platform"),
            "expired": oidc_token(
                oidc_key,
                iat=datetime.now(UTC) - timedelta(hours=2),
                exp=datetime.now(UTC) - timedelta(hours=1),
            ),
            "unbound subject": oidc_token(oidc_key, sub="00u-stranger"),
            "HS256 with the public key": jwt.encode(
                {
                    "sub": "x",
                    "preferred_username": "admin",
                    "iss": OIDC_ISSUER,
                    "aud": "humanwork-experts",
                    "iat": datetime.now(UTC),
                    "exp": datetime.now(UTC) + timedelta(minutes=5),
                },
                "a-symmetric-key-an-attacker-picked-0123",
                algorithm="HS256",
                headers={"kid": "idp-key-1"},
            ),
        }
        for kind, token in refused.items():
            r = await c.get("/users/me", headers=bearer(token))
            assert r.status_code == 401, kind
            assert r.json()["code"] == "unauthenticated", kind


async def test_oidc_tokens_are_refused_when_no_issuer_is_configured(
    client: httpx.AsyncClient, oidc_key: rsa.RSAPrivateKey
) -> None:
    r = await client.get("/users/me", headers=bearer(oidc_token(oidc_key)))
    assert r.status_code == 401 and r.json()["code"] == "unauthenticated"


async def _oidc_user(c: httpx.AsyncClient, username: str, role: str, subject: str) -> None:
    admin = await Api(c).admin()
    r = await c.post(
        "/users",
        json={
            "username": username,
            "role": role,
            "oidc_issuer": OIDC_ISSUER,
            "oidc_subject": subject,
        },
        headers=admin.headers,
    )
    assert r.status_code == 201, r.text
    assert r.json()["oidc_subject"] == subject


async def test_an_oidc_token_is_matched_by_issuer_and_subject_never_by_email(
    database_url: str, jwks_server: JwksServer, oidc_key: rsa.RSAPrivateKey
) -> None:
    """Mallory controls her own account at the identity provider and sets its email and
    preferred_username to Alice's (or to `admin`): her token, with her own `sub`, gets
    nothing of theirs."""
    settings = make_settings(
        database_url,
        oidc_jwks_url=jwks_server.url,
        oidc_issuer=OIDC_ISSUER,
        oidc_audience="humanwork-experts",
    )
    app = create_app(settings)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://p") as c,
    ):
        await _oidc_user(c, "alice", "admin", "sub-alice")
        alice = await c.get(
            "/users/me",
            headers=bearer(
                oidc_token(
                    oidc_key, sub="sub-alice", email="alice@acme.test", preferred_username="a"
                )
            ),
        )
        assert alice.status_code == 200 and alice.json()["username"] == "alice"
        for claims in (
            {"email": "alice@acme.test", "preferred_username": "alice"},
            {"email": "admin@acme.test", "preferred_username": "admin"},
            {"preferred_username": "sub-alice"},
        ):
            token = oidc_token(oidc_key, sub="sub-mallory", **claims)
            for path in ("/users/me", "/orgs"):
                r = await c.get(path, headers=bearer(token))
                assert r.status_code == 401, (claims, path, r.text)
                assert r.json()["code"] == "unauthenticated"
        # binding a second user to the same identity is refused
        admin = await Api(c).admin()
        twin = await c.post(
            "/users",
            json={
                "username": "alice-twin",
                "role": "viewer",
                "oidc_issuer": OIDC_ISSUER,
                "oidc_subject": "sub-alice",
            },
            headers=admin.headers,
        )
        assert twin.status_code == 409 and twin.json()["code"] == "conflict"
        half = await c.post(
            "/users",
            json={"username": "half", "role": "viewer", "oidc_subject": "sub-x"},
            headers=admin.headers,
        )
        assert half.status_code == 422
