"""Fixtures of the platform API tests: one throwaway PostgreSQL server per session, a
migrated template database, a fresh database per test (CREATE DATABASE ... TEMPLATE),
the app with its lifespan running, and an httpx client speaking ASGI to it.

When PostgreSQL cannot be had, the tests FAIL with the reason; they never skip.
"""

from __future__ import annotations

import base64
import socket
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from humanwork_dev.postgres import PostgresServer
from platform_api.app import create_app
from platform_api.auth import passwords
from platform_api.settings import Settings
from tests.fixtures.database import TEMPLATE

ADMIN_PASSWORD = "admin-password-for-tests-0192"
JWT_SECRET = "jwt-secret-for-the-platform-tests-0123456789"
CREDENTIALS_KEY = base64.b64encode(bytes(range(32))).decode()


@pytest.fixture
async def database_url(
    postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[str]:
    # cheaper scrypt for speed: the encoded hashes carry their parameters, and the
    # production parameters are checked by test_passwords.py
    monkeypatch.setattr(passwords, "N", 2**12)
    name = f"t_{uuid.uuid4().hex}"
    url = await postgres.create_database(name, template=TEMPLATE)
    yield url
    await postgres.drop_database(name)


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[AsyncEngine]:
    """A direct engine on the test's database, for checking and tampering."""
    engine = create_async_engine(database_url)
    yield engine
    await engine.dispose()


class RecordingNamespaces:
    """An `OrgNamespaces` that records what it was asked to create."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, uuid.UUID]] = []

    async def ensure(self, namespace: str, org_id: uuid.UUID) -> None:
        self.calls.append((namespace, org_id))


def make_settings(database_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "database_url": database_url,
        "admin_password": ADMIN_PASSWORD,
        "jwt_secret": JWT_SECRET,
        "credentials_keys": {"k1": CREDENTIALS_KEY},
        "credentials_active_key": "k1",
        "oidc_jwks_url": None,
        "access_map": None,
    }
    values.update(overrides)
    return Settings(**values)


@pytest.fixture
def settings(database_url: str) -> Settings:
    return make_settings(database_url)


@pytest.fixture
def namespaces() -> RecordingNamespaces:
    return RecordingNamespaces()


class StaticResolver:
    """The platform's resolver in the tests: names answer from `names`, never from the
    real network; any other name does not resolve. `asked` records the questions."""

    def __init__(self, names: dict[str, list[str]] | None = None) -> None:
        self.names = dict(names or {})
        self.asked: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append((host, port))
        if host not in self.names:
            raise socket.gaierror(socket.EAI_NONAME, f"{host} is not in the test's names")
        return list(self.names[host])


@pytest.fixture
def resolver() -> StaticResolver:
    return StaticResolver()


@pytest.fixture
async def app(
    settings: Settings, namespaces: RecordingNamespaces, resolver: StaticResolver
) -> AsyncIterator[FastAPI]:
    application = create_app(settings, namespaces=namespaces, resolver=resolver)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://platform") as c:
        yield c


@dataclass
class Caller:
    """A logged-in user and its bearer header."""

    username: str
    password: str
    headers: dict[str, str]
    org_ids: list[str] = field(default_factory=list)


class Api:
    """Helpers that drive the API the way a client would."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def login(self, username: str, password: str) -> dict[str, str]:
        r = await self.client.post("/auth/token", json={"username": username, "password": password})
        assert r.status_code == 200, r.text
        return {"Authorization": f"Bearer {r.json()['access_token']}"}

    async def admin(self) -> Caller:
        return Caller("admin", ADMIN_PASSWORD, await self.login("admin", ADMIN_PASSWORD))

    async def org(self, caller: Caller, slug: str, name: str | None = None) -> str:
        r = await self.client.post(
            "/orgs", json={"slug": slug, "name": name or slug.title()}, headers=caller.headers
        )
        assert r.status_code == 201, r.text
        org_id: str = r.json()["id"]
        caller.org_ids.append(org_id)
        return org_id

    async def user(self, creator: Caller, username: str, role: str, org_ids: list[str]) -> Caller:
        password = f"pw-{username}-0123456789"
        r = await self.client.post(
            "/users",
            json={"username": username, "password": password, "role": role, "org_ids": org_ids},
            headers=creator.headers,
        )
        assert r.status_code == 201, r.text
        return Caller(username, password, await self.login(username, password), list(org_ids))


@pytest.fixture
def api(client: httpx.AsyncClient) -> Api:
    return Api(client)


@dataclass
class TwoOrgs:
    """Org A with its admin, expert and viewer; org B with its own admin."""

    admin: Caller
    org_a: str
    org_b: str
    admin_a: Caller
    expert_a: Caller
    viewer_a: Caller
    admin_b: Caller


@pytest.fixture
async def two_orgs(api: Api) -> TwoOrgs:
    root = await api.admin()
    org_a = await api.org(root, "alpha")
    org_b = await api.org(root, "bravo")
    return TwoOrgs(
        admin=root,
        org_a=org_a,
        org_b=org_b,
        admin_a=await api.user(root, "admin-a", "admin", [org_a]),
        expert_a=await api.user(root, "expert-a", "expert", [org_a]),
        viewer_a=await api.user(root, "viewer-a", "viewer", [org_a]),
        admin_b=await api.user(root, "admin-b", "admin", [org_b]),
    )
