"""Shared setup of the client tests: the database on either backend (PostgreSQL from the
session's template, or an SQLite file the app migrated at startup) and an org with its
admin, an expert and two clients, beside another org with its own client. The world is
made through the API once per session and backend into a seed each test copies
(tests/platform/conftest.py)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from humanwork_dev.postgres import PostgresServer
from platform_api.auth import passwords
from platform_api.settings import Settings
from tests.fixtures.database import TEMPLATE
from tests.platform.conftest import (
    Api,
    Caller,
    forget_seed,
    plant_seed,
    postgres_seed,
    seed_of,
    sqlite_seed,
)


async def backend_url(
    request: pytest.FixtureRequest,
    postgres: PostgresServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[str]:
    """The test's database URL on the backend `request.param` names (the session's
    PostgreSQL server runs either way)."""
    monkeypatch.setattr(passwords, "N", 2**12)
    seeded = "world" in request.fixturenames
    if request.param == "sqlite":
        if seeded:
            url = await sqlite_seed(tmp_path / "platform.db", "world", make_world)
        else:
            url = f"sqlite+aiosqlite:///{tmp_path / 'platform.db'}"
        yield url
        forget_seed(url)
        return
    name = f"t_{uuid.uuid4().hex}"
    template = await postgres_seed(postgres, "world", make_world) if seeded else TEMPLATE
    url = await postgres.create_database(name, template=template)
    plant_seed(url, template)
    yield url
    forget_seed(url)
    await postgres.drop_database(name)


async def seeded_world(api: Api, settings: Settings) -> World:
    """The test's copy of the seeded world, or one made through the API."""
    seeded = seed_of(settings.database_url, settings)
    return seeded if isinstance(seeded, World) else await make_world(api)


@dataclass
class World:
    """Org A: its admin, an expert, two clients; org B: its admin and a client."""

    root: Caller
    org_a: str
    org_b: str
    admin_a: Caller
    expert_a: Caller
    client_1: Caller
    client_2: Caller
    admin_b: Caller
    client_b: Caller


async def make_world(api: Api) -> World:
    root = await api.admin()
    org_a = await api.org(root, "alpha")
    org_b = await api.org(root, "bravo")
    return World(
        root=root,
        org_a=org_a,
        org_b=org_b,
        admin_a=await api.user(root, "admin-a", "admin", [org_a]),
        expert_a=await api.user(root, "expert-a", "expert", [org_a]),
        client_1=await api.user(root, "client-1", "client", [org_a]),
        client_2=await api.user(root, "client-2", "client", [org_a]),
        admin_b=await api.user(root, "admin-b", "admin", [org_b]),
        client_b=await api.user(root, "client-b", "client", [org_b]),
    )


async def start(
    client: httpx.AsyncClient, caller: Caller, org: str, subject: str, message: str | None = None
) -> dict[str, Any]:
    """A conversation the caller starts (with its first message)."""
    body: dict[str, Any] = {"subject": subject}
    if message is not None:
        body["message"] = message
    r = await client.post(f"/orgs/{org}/conversations", json=body, headers=caller.headers)
    assert r.status_code == 201, r.text
    made: dict[str, Any] = r.json()
    return made


def code(r: httpx.Response) -> str:
    value: str = r.json()["code"]
    return value
