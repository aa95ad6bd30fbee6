"""Password guessing from the attacker's side (issue 12, item 8): failed logins are
throttled per username and per client address (429 `login_throttled` with
`Retry-After`), a guess is not an audit write (the lockout is, once), and another user
signing in from the same address is not refused until that address is over its own
limit."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from platform_api.auth.throttle import Limits, LoginThrottle, LoginThrottled
from platform_api.db import make_sessionmaker
from platform_api.settings import Settings
from tests.platform.conftest import ADMIN_PASSWORD, TwoOrgs, make_settings

PER_USER, PER_CLIENT, WINDOW = 3, 5, 600


@pytest.fixture
def settings(database_url: str) -> Settings:
    return make_settings(
        database_url,
        login_max_failures_per_user=PER_USER,
        login_max_failures_per_client=PER_CLIENT,
        login_failure_window_seconds=WINDOW,
    )


def _from(app: FastAPI, address: str) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(address, 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://platform")


@pytest.fixture
async def attacker(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with _from(app, "198.51.100.7") as c:
        yield c


async def _login(c: httpx.AsyncClient, username: str, password: str) -> httpx.Response:
    return await c.post("/auth/token", json={"username": username, "password": password})


async def _auth_audit(db: AsyncEngine) -> list[tuple[str, str]]:
    async with db.connect() as conn:
        rows = await conn.execute(
            text("SELECT action, target FROM audit_log WHERE action LIKE 'auth.%' ORDER BY id")
        )
        return [(r[0], r[1]) for r in rows]


def _throttled(r: httpx.Response, scope: str) -> None:
    assert r.status_code == 429, r.text
    body = r.json()
    assert body["code"] == "login_throttled" and body["details"]["scope"] == scope
    retry_after = int(r.headers["Retry-After"])
    assert 0 < retry_after <= WINDOW
    assert body["details"]["retryAfterSeconds"] == str(retry_after)


async def test_guessing_a_users_password_is_throttled_without_an_audit_row_per_guess(
    app: FastAPI, attacker: httpx.AsyncClient, two_orgs: TwoOrgs, db: AsyncEngine
) -> None:
    victim = two_orgs.expert_a
    for guess in range(PER_USER):
        r = await _login(attacker, victim.username, f"guess-{guess}-0123456789")
        assert r.status_code == 401, r.text
    # now even the right password is refused for this username, from anywhere
    _throttled(await _login(attacker, victim.username, victim.password), "username")
    async with _from(app, "203.0.113.50") as elsewhere:
        _throttled(await _login(elsewhere, victim.username, victim.password), "username")
        # another user from that address and from the attacker's is not affected
        assert (await _login(elsewhere, "viewer-a", two_orgs.viewer_a.password)).status_code == 200
    assert (await _login(attacker, "viewer-a", two_orgs.viewer_a.password)).status_code == 200
    assert await _auth_audit(db) == [("auth.lockout", f"user:{victim.username}")]


async def test_a_client_spraying_usernames_is_throttled_per_address(
    app: FastAPI, attacker: httpx.AsyncClient, two_orgs: TwoOrgs, db: AsyncEngine
) -> None:
    for n in range(PER_CLIENT):
        r = await _login(attacker, f"user-{n}", "spray-password-0123")
        assert r.status_code == 401, r.text
    # the address is over its limit: refused before any password is checked
    _throttled(await _login(attacker, "admin", ADMIN_PASSWORD), "client")
    _throttled(await _login(attacker, "user-99", "spray-password-0123"), "client")
    # the same users from another address sign in
    async with _from(app, "203.0.113.50") as other:
        assert (await _login(other, "admin", ADMIN_PASSWORD)).status_code == 200
    assert await _auth_audit(db) == [("auth.lockout", "client:198.51.100.7")]


async def test_a_success_clears_the_users_failures(
    attacker: httpx.AsyncClient, two_orgs: TwoOrgs
) -> None:
    viewer = two_orgs.viewer_a
    for _ in range(2):
        for _ in range(PER_USER - 1):
            assert (await _login(attacker, viewer.username, "wrong-0123456789")).status_code == 401
        assert (await _login(attacker, viewer.username, viewer.password)).status_code == 200


async def test_failures_age_out_of_the_window(db: AsyncEngine) -> None:
    start = datetime(2026, 12, 1, tzinfo=UTC)
    now = [start]
    throttle = LoginThrottle(
        Limits(per_user=2, per_client=10, window=60), make_sessionmaker(db), clock=lambda: now[0]
    )
    assert await throttle.failed("bob", "c") == []
    now[0] += timedelta(seconds=30)
    assert await throttle.failed("bob", "c") == ["username"]
    with pytest.raises(LoginThrottled) as caught:
        await throttle.check("bob", "c")
    assert caught.value.details["retryAfterSeconds"] == "30"
    now[0] += timedelta(seconds=30.5)
    await throttle.check("bob", "c")  # the first failure aged out: one more try
    assert await throttle.failed("bob", "c") == ["username"]
    with pytest.raises(LoginThrottled):
        await throttle.check("bob", "c")
    # past the limit, a failure starts no second lockout
    assert await throttle.failed("bob", "c") == []
    await throttle.check("alice", "c")  # another user from the same client
