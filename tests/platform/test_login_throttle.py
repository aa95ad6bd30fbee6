"""Password guessing from the attacker's side: failed logins back off per username and
client address together, with ceilings per address (spraying usernames) and per
username (guessing from many addresses, never holding back an address without a failure
for that username); a guess is not an audit write (the lockout is, once); the back-off
grows and failures age out of the window."""

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

PER_PAIR, PER_USER, PER_CLIENT, WINDOW = 3, 3, 5, 600


@pytest.fixture
def settings(database_url: str) -> Settings:
    return make_settings(
        database_url,
        login_max_failures=PER_PAIR,
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


async def test_guessing_from_many_addresses_meets_the_users_ceiling_not_its_owner(
    app: FastAPI, two_orgs: TwoOrgs, db: AsyncEngine
) -> None:
    victim = two_orgs.expert_a
    for n in range(PER_USER):
        async with _from(app, f"198.51.100.{n + 1}") as bot:
            assert (await _login(bot, victim.username, f"guess-{n}-0123")).status_code == 401
    # every guessing address backs off for this username, the right password included
    async with _from(app, "198.51.100.1") as bot:
        _throttled(await _login(bot, victim.username, victim.password), "username")
        # another user from a guessing address is not held back
        assert (await _login(bot, "viewer-a", two_orgs.viewer_a.password)).status_code == 200
    # an address without a failure for this username is not held back by the ceiling
    async with _from(app, "203.0.113.50") as home:
        assert (await _login(home, victim.username, victim.password)).status_code == 200
    assert await _auth_audit(db) == [("auth.lockout", f"user:{victim.username}")]


async def test_a_success_clears_the_pairs_failures(
    attacker: httpx.AsyncClient, two_orgs: TwoOrgs
) -> None:
    viewer = two_orgs.viewer_a
    for _ in range(2):
        for _ in range(PER_PAIR - 1):
            assert (await _login(attacker, viewer.username, "wrong-0123456789")).status_code == 401
        assert (await _login(attacker, viewer.username, viewer.password)).status_code == 200


async def _attempt(throttle: LoginThrottle, db: AsyncEngine, user: str, client: str) -> list[str]:
    """One failed attempt; the scopes whose limit it reached."""
    async with make_sessionmaker(db)() as session, session.begin():
        return list((await throttle.begin(session, user, client)).reaches)


async def test_the_back_off_grows_and_failures_age_out(db: AsyncEngine) -> None:
    start = datetime(2026, 12, 1, tzinfo=UTC)
    now = [start]
    throttle = LoginThrottle(
        Limits(per_pair=2, per_user=10, per_client=10, window=300, backoff=10),
        clock=lambda: now[0],
    )
    assert await _attempt(throttle, db, "bob", "c") == []
    now[0] += timedelta(seconds=5)
    assert await _attempt(throttle, db, "bob", "c") == ["pair"]
    with pytest.raises(LoginThrottled) as caught:
        await _attempt(throttle, db, "bob", "c")
    assert caught.value.details == {"retryAfterSeconds": "10", "scope": "pair"}
    now[0] += timedelta(seconds=10)
    assert await _attempt(throttle, db, "bob", "c") == []  # past the limit: no second lockout
    with pytest.raises(LoginThrottled) as caught:
        await _attempt(throttle, db, "bob", "c")
    assert caught.value.details["retryAfterSeconds"] == "20"
    assert await _attempt(throttle, db, "alice", "c") == []  # another user from that client
    assert await _attempt(throttle, db, "bob", "d") == []  # that user from another client
    now[0] += timedelta(seconds=300)  # every failure of bob from c aged out
    assert await _attempt(throttle, db, "bob", "c") == []
