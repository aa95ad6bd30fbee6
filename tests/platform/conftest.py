"""Fixtures of the platform API tests: one throwaway PostgreSQL server per session, a
migrated template database, a fresh database per test (CREATE DATABASE ... TEMPLATE),
the app with its lifespan running, and an httpx client speaking ASGI to it.

A world that many tests start from (`two_orgs`: two orgs and their users, made through
the API and signed in) is made once per session into a seed of its own (a database the
tests copy, or an SQLite file they copy); each test gets its own copy of the seed's data
and of the callers, so no test sees another's writes. httpx's default TLS context (the
certifi bundle, 0.1 to 0.2 s of CPU each time an app builds a client) is loaded once.

When PostgreSQL cannot be had, the tests FAIL with the reason; they never skip.
"""

from __future__ import annotations

import atexit
import base64
import copy
import os
import shutil
import socket
import ssl
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from humanwork_dev.postgres import PostgresServer
from platform_api.app import create_app
from platform_api.auth import passwords
from platform_api.settings import Settings
from tests.fixtures.database import TEMPLATE

ADMIN_PASSWORD = "admin-password-for-tests-0192"
JWT_SECRET = "jwt-secret-for-the-platform-tests-0123456789"
CREDENTIALS_KEY = base64.b64encode(bytes(range(32))).decode()


@pytest.fixture(scope="session", autouse=True)
def _one_default_tls_context() -> Iterator[None]:
    """httpx's default context (verify=True, no client certificate) made once and shared,
    as httpx allows; any other verify (a test's own CA) is made as before."""
    made = httpx.create_ssl_context

    def create(
        verify: ssl.SSLContext | str | bool = True, cert: Any = None, trust_env: bool = True
    ) -> ssl.SSLContext:
        env = trust_env and ("SSL_CERT_FILE" in os.environ or "SSL_CERT_DIR" in os.environ)
        if verify is not True or cert is not None or env:
            return made(verify, cert, trust_env)
        if not _DEFAULT_TLS:
            _DEFAULT_TLS.append(made(True, None, False))
        return _DEFAULT_TLS[0]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(httpx, "create_ssl_context", create)
        patch.setattr(httpx._transports.default, "create_ssl_context", create)
        yield


_DEFAULT_TLS: list[ssl.SSLContext] = []


@pytest.fixture
async def database_url(
    request: pytest.FixtureRequest, postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[str]:
    # cheaper scrypt for speed: the encoded hashes carry their parameters, and the
    # production parameters are checked by test_passwords.py
    monkeypatch.setattr(passwords, "N", 2**12)
    name = f"t_{uuid.uuid4().hex}"
    template = TEMPLATE
    if "two_orgs" in request.fixturenames:
        template = await postgres_seed(postgres, "two_orgs", make_two_orgs)
    url = await postgres.create_database(name, template=template)
    plant_seed(url, template)
    yield url
    forget_seed(url)
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
async def two_orgs(api: Api, settings: Settings) -> TwoOrgs:
    """Copied from the session's seed when the test's database is a copy of it (the
    callers' tokens were signed with the seed's settings), else made through the API."""
    seeded = seed_of(settings.database_url, settings)
    return seeded if isinstance(seeded, TwoOrgs) else await make_two_orgs(api)


async def make_two_orgs(api: Api) -> TwoOrgs:
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


# seeds: name of the seed's template database or SQLite file -> what its builder returned
_SEEDS: dict[str, Any] = {}
# the test's database URL -> the value of the seed it was copied from (None: no seed)
_SEEDED: dict[str, Any] = {}
_SEED_DIR: list[Path] = []


def _database(url: str) -> str:
    """The database a URL names, whichever role connects (the owner or the app role)."""
    parsed = make_url(url)
    return f"{parsed.drivername}://{parsed.host}:{parsed.port}/{parsed.database}"


def plant_seed(database_url: str, template: str) -> None:
    """Remember that the test's database was copied from `template` (a seed or not)."""
    _SEEDED[_database(database_url)] = _SEEDS.get(template)


def forget_seed(database_url: str) -> None:
    _SEEDED.pop(_database(database_url), None)


def seed_of(database_url: str, settings: Settings) -> Any:
    """A copy of the seed value the test's database was copied from, or None. The seed's
    tokens and admin hold only under the settings the seed was made with."""
    value = _SEEDED.get(_database(database_url))
    if value is None:
        return None
    secrets = (settings.jwt_secret, settings.admin_password)
    assert [s.get_secret_value() if s else s for s in secrets] == [JWT_SECRET, ADMIN_PASSWORD], (
        "a seeded world needs the seed's jwt_secret and admin_password"
    )
    return copy.deepcopy(value)


async def _build(url: str, build: Callable[[Api], Awaitable[Any]]) -> Any:
    application = create_app(
        make_settings(url), namespaces=RecordingNamespaces(), resolver=StaticResolver()
    )
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://platform") as c:
            return await build(Api(c))


async def postgres_seed(
    postgres: PostgresServer, name: str, build: Callable[[Api], Awaitable[Any]]
) -> str:
    """The template database of seed `name` (made from the migrated template by `build`
    through the API, once per session); tests copy it."""
    template = f"humanwork_seed_{name}"
    if template not in _SEEDS:
        await postgres.drop_database(template)
        url = await postgres.create_database(template, template=TEMPLATE)
        _SEEDS[template] = await _build(url, build)
    return template


async def sqlite_seed(target: Path, name: str, build: Callable[[Api], Awaitable[Any]]) -> str:
    """Copy seed `name` (an SQLite file the app migrated at startup, then `build` filled
    through the API, once per session) to `target`; the copy's URL."""
    if not _SEED_DIR:
        _SEED_DIR.append(Path(tempfile.mkdtemp(prefix="humanwork-seeds-")))
        atexit.register(shutil.rmtree, _SEED_DIR[0], True)
    source = _SEED_DIR[0] / f"{name}.db"
    if str(source) not in _SEEDS:
        source.unlink(missing_ok=True)
        _SEEDS[str(source)] = await _build(f"sqlite+aiosqlite:///{source}", build)
    assert not source.with_name(f"{name}.db-wal").exists(), "the seed's WAL was not checkpointed"
    shutil.copyfile(source, target)
    url = f"sqlite+aiosqlite:///{target}"
    plant_seed(url, str(source))
    return url
