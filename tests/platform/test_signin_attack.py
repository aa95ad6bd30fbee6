"""Sign-in under attack, from the attacker's side: a burst of parallel wrong passwords
neither starves the connection pool (the rest of the API and other users' sign-in keep
answering, on a pool of two) nor gets more guesses through than the limit; the owner of
the account signs in from elsewhere while the guesser backs off; and the client address
comes only from trusted proxies' `X-Forwarded-For`.

`PoolWatch` records, per asyncio task (one per request under the ASGI transport), how
many pooled connections it holds at once: no request may hold two. The tests that
starve the pool run on two connections without overflow.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine

from platform_api.app import create_app
from platform_api.auth.signin import LOGINS
from platform_api.db import ENGINE
from platform_api.settings import Settings
from tests.fuzz.serve import served
from tests.platform.conftest import ADMIN_PASSWORD, TwoOrgs, make_settings

GUESSERS, GUESSES = 16, 3
LIMIT, BACKOFF, WINDOW = 5, 600, 3600
ATTACKER, VICTIM_HOME, PROXY = "198.51.100.7", "203.0.113.50", "10.9.0.4"


class PoolWatch:
    """The most pooled connections any one task held at once."""

    def __init__(self, engine: Any) -> None:
        self.pool = engine.sync_engine.pool
        self.held: Counter[int] = Counter()
        self.most: dict[int, int] = {}
        event.listen(self.pool, "checkout", self._out)
        event.listen(self.pool, "checkin", self._in)
        self._owner: dict[int, int] = {}

    def _task(self) -> int:
        try:
            return id(asyncio.current_task())
        except RuntimeError:
            return 0

    def _out(self, _dbapi: Any, record: Any, _proxy: Any) -> None:
        task = self._task()
        self._owner[id(record)] = task
        self.held[task] += 1
        self.most[task] = max(self.most.get(task, 0), self.held[task])

    def _in(self, _dbapi: Any, record: Any) -> None:
        task = self._owner.pop(id(record), None)
        if task is not None:
            self.held[task] -= 1

    def close(self) -> None:
        event.remove(self.pool, "checkout", self._out)
        event.remove(self.pool, "checkin", self._in)

    def worst(self) -> int:
        return max(self.most.values(), default=0)


@pytest.fixture
def pool_size() -> int:
    """The pool's connections (no overflow); a test starving it sets 2."""
    return 20


@pytest.fixture
def settings(database_url: str, pool_size: int) -> Settings:
    return make_settings(
        database_url,
        database_pool_size=pool_size,
        database_pool_overflow=0,
        login_max_failures=LIMIT,
        login_max_failures_per_user=LIMIT,
        login_max_failures_per_client=1000,
        login_failure_window_seconds=WINDOW,
        login_backoff_seconds=BACKOFF,
        trusted_proxies=["10.9.0.0/16"],
    )


@pytest.fixture
def watch(app: FastAPI) -> Iterator[PoolWatch]:
    w = PoolWatch(ENGINE.of(app.state))
    yield w
    w.close()


def _from(app: FastAPI, address: str) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(address, 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://platform", timeout=120)


@pytest.fixture
async def attacker(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with _from(app, ATTACKER) as c:
        yield c


async def _login(
    c: httpx.AsyncClient, username: str, password: str, forwarded: str | None = None
) -> httpx.Response:
    headers = {"X-Forwarded-For": forwarded} if forwarded else {}
    return await c.post(
        "/auth/token", json={"username": username, "password": password}, headers=headers
    )


def _throttled(r: httpx.Response, scope: str) -> int:
    assert r.status_code == 429, r.text
    body = r.json()
    assert body["code"] == "login_throttled" and body["details"]["scope"] == scope
    retry_after = int(r.headers["Retry-After"])
    assert body["details"]["retryAfterSeconds"] == str(retry_after)
    return retry_after


async def _failures(db: AsyncEngine, scope: str, key: str) -> int:
    async with db.connect() as conn:
        found = await conn.scalar(
            text("SELECT count(*) FROM login_failures WHERE scope = :s AND key = :k"),
            {"s": scope, "k": key},
        )
    return int(found or 0)


async def _lockouts(db: AsyncEngine) -> list[str]:
    async with db.connect() as conn:
        rows = await conn.execute(
            text("SELECT target FROM audit_log WHERE action = 'auth.lockout' ORDER BY id")
        )
        return [r[0] for r in rows]


@pytest.mark.parametrize("pool_size", [2])
def _reached(username: str, address: str) -> list[str]:
    """The lockouts audited when one address's guesses reach the limit (the pair's, and
    the username's, whose ceiling this module sets as low)."""
    return [f"user:{username} client:{address}", f"user:{username}"]


async def test_a_burst_of_guessers_leaves_sign_in_and_the_api_answering(
    app: FastAPI, attacker: httpx.AsyncClient, two_orgs: TwoOrgs, watch: PoolWatch
) -> None:
    victim, viewer = two_orgs.expert_a, two_orgs.viewer_a
    started = asyncio.Event()

    async def guesser(n: int) -> list[int]:
        codes = []
        for g in range(GUESSES):
            codes.append(
                (await _login(attacker, victim.username, f"guess-{n}-{g}-0123")).status_code
            )
            started.set()
        return codes

    async def legitimate() -> tuple[int, int]:
        await started.wait()
        async with _from(app, VICTIM_HOME) as home:
            signed_in = await _login(home, victim.username, victim.password)
            me = await home.get("/users/me", headers=viewer.headers)
        return signed_in.status_code, me.status_code

    results = await asyncio.gather(legitimate(), *(guesser(n) for n in range(GUESSERS)))
    assert results[0] == (200, 200)
    guesses = Counter(code for codes in results[1:] for code in codes)
    assert set(guesses) <= {401, 429} and guesses[401] == LIMIT, guesses
    assert watch.worst() == 1, "a request held two pooled connections at once"


async def test_parallel_guesses_for_one_user_count_exactly_the_limit(
    app: FastAPI, attacker: httpx.AsyncClient, two_orgs: TwoOrgs, db: AsyncEngine
) -> None:
    victim = two_orgs.viewer_a
    answers = await asyncio.gather(
        *(_login(attacker, victim.username, f"parallel-{n}-0123") for n in range(GUESSERS))
    )
    codes = Counter(r.status_code for r in answers)
    assert codes == {401: LIMIT, 429: GUESSERS - LIMIT}, codes
    assert await _failures(db, "username", victim.username) == LIMIT
    # the right password from the guesser's address waits its turn too
    _throttled(await _login(attacker, victim.username, victim.password), "pair")


async def test_the_owner_signs_in_from_elsewhere_while_the_guesser_backs_off(
    app: FastAPI, attacker: httpx.AsyncClient, two_orgs: TwoOrgs, db: AsyncEngine
) -> None:
    victim = two_orgs.expert_a
    for g in range(LIMIT):
        assert (await _login(attacker, victim.username, f"guess-{g}-0123")).status_code == 401
    # the owner signs in from home ...
    async with _from(app, VICTIM_HOME) as home:
        assert (await _login(home, victim.username, victim.password)).status_code == 200
    # ... while the guesser is held back, even with the right password
    now = [datetime.now(UTC)]
    LOGINS.of(app.state).throttle.clock = lambda: now[0]
    wait = _throttled(await _login(attacker, victim.username, victim.password), "pair")
    assert BACKOFF - 60 <= wait <= BACKOFF
    # a back-off, not a lock: one more guess after the wait, then twice the wait
    now[0] += timedelta(seconds=BACKOFF)
    assert (await _login(attacker, victim.username, "late-guess-0123")).status_code == 401
    assert _throttled(await _login(attacker, victim.username, "again-0123"), "pair") == 2 * BACKOFF
    assert await _lockouts(db) == _reached(victim.username, ATTACKER)


async def test_a_forwarded_for_from_an_untrusted_peer_is_ignored(
    app: FastAPI, attacker: httpx.AsyncClient, two_orgs: TwoOrgs, db: AsyncEngine
) -> None:
    victim = two_orgs.expert_a
    for g in range(LIMIT):
        # each guess claims another address: it is counted against the peer's
        r = await _login(attacker, victim.username, f"guess-{g}-0123", forwarded=f"192.0.2.{g}")
        assert r.status_code == 401, r.text
    _throttled(await _login(attacker, victim.username, "x-0123", forwarded="192.0.2.99"), "pair")
    assert await _failures(db, "pair", f"{ATTACKER} {victim.username}") == LIMIT
    assert await _lockouts(db) == _reached(victim.username, ATTACKER)
    # the address it named is not framed: its owner signs in from there
    async with _from(app, "192.0.2.1") as framed:
        assert (await _login(framed, victim.username, victim.password)).status_code == 200


async def test_a_trusted_proxys_forwarded_for_is_honoured(
    app: FastAPI, two_orgs: TwoOrgs, db: AsyncEngine
) -> None:
    victim, guesser, owner = two_orgs.expert_a, "192.0.2.66", "192.0.2.10"
    async with _from(app, PROXY) as ingress:
        for g in range(LIMIT):
            # the guesser prepends a hop of its own: only the trusted hops are believed
            hops = f"203.0.113.77, {guesser}, 10.9.0.8"
            r = await _login(ingress, victim.username, f"guess-{g}-0123", forwarded=hops)
            assert r.status_code == 401, r.text
        refused = await _login(ingress, victim.username, victim.password, forwarded=guesser)
        _throttled(refused, "pair")
        # the owner behind the same ingress is another client
        assert (await _login(ingress, victim.username, victim.password, owner)).status_code == 200
    assert await _lockouts(db) == _reached(victim.username, guesser)
    # positive control for the admin, through the proxy without a header: the proxy itself
    async with _from(app, PROXY) as bare:
        assert (await _login(bare, "admin", ADMIN_PASSWORD)).status_code == 200


@pytest.mark.parametrize("pool_size", [2])
async def test_a_refused_request_holds_one_connection(
    app: FastAPI, two_orgs: TwoOrgs, watch: PoolWatch, db: AsyncEngine
) -> None:
    url = f"/orgs/{two_orgs.org_a}/integrations"
    async with _from(app, VICTIM_HOME) as c:
        refused = await asyncio.gather(
            *(c.get(url, headers=two_orgs.viewer_a.headers) for _ in range(4)),
            *(c.get(url, headers=two_orgs.admin_b.headers) for _ in range(4)),
        )
        assert [r.status_code for r in refused] == [403] * 4 + [404] * 4, refused[0].text
        assert (await c.get(url, headers=two_orgs.admin_a.headers)).status_code == 200
    async with db.connect() as conn:
        denied = await conn.scalar(
            text("SELECT count(*) FROM audit_log WHERE action = 'access.denied'")
        )
    assert denied == 8
    assert watch.worst() == 1, "a refused request held two pooled connections at once"


@pytest.mark.parametrize("pool_size", [2])
async def test_open_event_streams_leave_the_pool_answering(
    settings: Settings, two_orgs: TwoOrgs
) -> None:
    """Each live event stream used to hold its request's connection while its own
    session took a second: two streams on a pool of two starved it."""
    served_app = create_app(settings.model_copy(update={"events_heartbeat_seconds": 0.2}))
    headers = two_orgs.viewer_a.headers
    with served(served_app) as url:
        watch = PoolWatch(ENGINE.of(served_app.state))
        try:
            async with (
                httpx.AsyncClient(base_url=url, timeout=60) as http,
                contextlib.AsyncExitStack() as streams,
            ):
                for _ in range(3):
                    opened = await streams.enter_async_context(
                        http.stream("GET", "/human-tasks/events", headers=headers)
                    )
                    assert opened.status_code == 200
                    assert await anext(opened.aiter_bytes())  # a heartbeat at least
                me = await http.get("/users/me", headers=headers)
                assert me.status_code == 200, me.text
        finally:
            watch.close()
    assert watch.worst() == 1, "a stream held two pooled connections at once"
