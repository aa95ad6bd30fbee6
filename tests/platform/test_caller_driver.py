"""The caller's query on the driver (PostgreSQL): `floor.accounts.principal_on_driver`
answers what SQLAlchemy's statement answers, for a member of several orgs, of a
deactivated org, of none, by username and by OIDC identity; a decision's session
(`autocommitting`) sends it without SQLAlchemy's execution; `GET /users/me` reads its
caller and orgs on one pooled connection with no transaction, fresh on every request; and
`db.driver_connection` gives its connection back after a block's own error, never after
a cancellation."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator
from typing import Any, cast

import httpx
import pytest
from asyncpg.transaction import Transaction
from fastapi import FastAPI
from fastapi.security import HTTPAuthorizationCredentials
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine

from platform_api.auth.dependencies import get_principal, principal_from
from platform_api.auth.tokens import TOKENS
from platform_api.db import ENGINE, autocommitting, driver_connection
from platform_api.errors import Unauthenticated
from platform_api.floor.accounts import UserRepository, principal_on_driver
from platform_api.kube.client import KubeClient
from platform_api.state import KUBE
from platform_api.tasks.deciding import deciding
from tests.platform.callers_support import ISSUER, sql, varied_callers
from tests.platform.conftest import Api, TwoOrgs


async def test_the_drivers_caller_query_answers_as_sqlalchemys(
    app: FastAPI, api: Api, two_orgs: TwoOrgs, db: AsyncEngine
) -> None:
    await varied_callers(api, two_orgs, db)
    await sql(db, "UPDATE users SET deactivated_at = now() WHERE username = 'viewer-a'")
    asks: list[dict[str, str]] = [
        {"username": u} for u in ("admin", "admin-b", "expert-a", "viewer-a", "nobody", "ghost")
    ]
    asks += [{"issuer": ISSUER, "subject": "sub-x"}, {"issuer": ISSUER, "subject": "sub-y"}]
    engine = ENGINE.of(app.state)
    async with AsyncSession(engine) as session, driver_connection(engine) as driver:
        assert driver is not None
        users = UserRepository(session)
        for ask in asks:
            assert await principal_on_driver(driver, **ask) == await users.principal_of(**ask), ask
    async with driver_connection(engine) as driver:
        root = await principal_on_driver(driver, username="admin")
        nobody = await principal_on_driver(driver, username="nobody")
        bound = await principal_on_driver(driver, issuer=ISSUER, subject="sub-x")
        gone = await principal_on_driver(driver, username="viewer-a")
    assert root is not None and root[0].platform_admin and root[0].role == "admin"
    assert {str(o): g.deactivated for o, g in root[1].items()} == {
        two_orgs.org_a: False,
        two_orgs.org_b: True,
    }
    assert "run.control" in root[1][next(iter(root[1]))].capabilities
    assert nobody is not None and nobody[1] == {} and nobody[0].role == "viewer"
    assert bound is not None and bound[0].username == "expert-a"
    assert gone is not None and gone[0].deactivated_at is not None
    with pytest.raises(Unauthenticated) as refused:
        principal_from(gone)
    assert refused.value.code == "user_deactivated"


async def test_a_decisions_session_sends_the_callers_query_to_the_driver(
    app: FastAPI, two_orgs: TwoOrgs
) -> None:
    engine = ENGINE.of(app.state)
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        seen.append(statement)

    event.listen(engine.sync_engine, "before_cursor_execute", record)
    try:
        for autocommits in (False, True):
            seen.clear()
            async with AsyncSession(engine) as session:
                if autocommits:
                    await autocommitting(session)
                principal = await get_principal(
                    session, TOKENS.of(app.state), _credentials(two_orgs.expert_a.headers)
                )
            assert principal.username == "expert-a"
            assert [str(o) for o in principal.org_ids] == [two_orgs.org_a]
            through_sqlalchemy = [s for s in seen if "FROM users" in s]
            # the positive control: without `autocommitting` SQLAlchemy sends it
            assert len(through_sqlalchemy) == (0 if autocommits else 1), autocommits
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", record)


def _credentials(headers: dict[str, str]) -> HTTPAuthorizationCredentials:
    scheme, _, token = headers["Authorization"].partition(" ")
    return HTTPAuthorizationCredentials(scheme=scheme, credentials=token)


@pytest.fixture
def begun(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The transactions asyncpg began (the test's own requests: nothing else runs here)."""
    started: list[str] = []
    original = Transaction.start

    async def start(self: Transaction) -> None:
        started.append("begin")
        await original(self)

    monkeypatch.setattr(Transaction, "start", start)
    yield started


async def test_me_reads_on_the_driver_with_no_transaction_and_fresh_each_time(
    client: httpx.AsyncClient, two_orgs: TwoOrgs, db: AsyncEngine, begun: list[str]
) -> None:
    orgs = (await client.get("/orgs", headers=two_orgs.admin.headers)).json()
    assert begun, "the positive control: a route with a session begins its transaction"
    begun.clear()
    me = await client.get("/users/me", headers=two_orgs.admin.headers)
    assert me.status_code == 200, me.text
    assert begun == []
    body = me.json()
    assert body["orgs"] == sorted(orgs, key=lambda o: o["slug"])
    assert (body["username"], body["role"], body["platformAdmin"]) == ("admin", "admin", True)
    assert body["roles"] == {two_orgs.org_a: "admin", two_orgs.org_b: "admin"}

    # a removed membership, a deactivated org, a deactivated user: at the next request
    await sql(
        db,
        "DELETE FROM memberships WHERE org_id = CAST(:o AS uuid) AND user_id = "
        "(SELECT id FROM users WHERE username = 'admin')",
        o=two_orgs.org_b,
    )
    await sql(
        db, "UPDATE orgs SET deactivated_at = now() WHERE id = CAST(:o AS uuid)", o=two_orgs.org_a
    )
    begun.clear()  # the test's own writes
    after = (await client.get("/users/me", headers=two_orgs.admin.headers)).json()
    assert [o["id"] for o in after["orgs"]] == [two_orgs.org_a]
    assert after["orgs"][0]["deactivated_at"] is not None
    assert after["roles"] == {two_orgs.org_a: "admin"}
    await sql(db, "UPDATE users SET deactivated_at = now() WHERE username = 'expert-a'")
    assert len(begun) == 1  # the test's own write
    begun.clear()
    for _ in range(40):  # more than the pool holds: each refusal gives its connection back
        r = await client.get("/users/me", headers=two_orgs.expert_a.headers)
        assert (r.status_code, r.json()["code"]) == (401, "user_deactivated")
    ok = await client.get("/users/me", headers=two_orgs.admin_b.headers)
    assert ok.status_code == 200 and ok.json()["orgs"][0]["id"] == two_orgs.org_b
    assert begun == []


async def test_driver_connection_keeps_a_sound_connection_and_gives_up_a_cancelled_one(
    database_url: str,
) -> None:
    engine = create_async_engine(database_url, pool_size=1, max_overflow=0)
    try:
        async with driver_connection(engine) as driver:
            first = driver
        with pytest.raises(Unauthenticated):
            async with driver_connection(engine) as driver:
                assert driver is first
                await driver.fetchval("SELECT 1")
                raise Unauthenticated("the block's own error")
        with pytest.raises(Exception, match="division by zero"):
            async with driver_connection(engine) as driver:
                assert driver is first  # kept after the block's error
                await driver.fetchval("SELECT 1 / 0")

        async def cancelled() -> None:
            async with driver_connection(engine) as held:
                await held.fetchval("SELECT pg_sleep(5)")

        task = asyncio.ensure_future(cancelled())
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        async with driver_connection(engine) as driver:
            assert driver is not first  # given up: a new connection
            assert await driver.fetchval("SELECT 1") == 1
    finally:
        await engine.dispose()


async def test_a_decision_routes_session_ends_with_every_answer(
    app: FastAPI, client: httpx.AsyncClient, two_orgs: TwoOrgs
) -> None:
    """`tasks.deciding` is a plain dependency whose session ends on FastAPI's exit stack:
    whatever the answer (the caller refused, the capability missing, the body invalid, no
    Kubernetes API behind the check), its connection is back in the pool afterwards."""
    assert not inspect.isasyncgenfunction(deciding)  # no yield dependency's machinery
    pool = ENGINE.of(app.state).sync_engine.pool
    mine = asyncio.current_task()  # the transport runs the app in this task
    held: set[int] = set()
    lent: list[int] = []

    def checkout(_dbapi: Any, record: Any, _proxy: Any) -> None:
        if asyncio.current_task() is mine:
            held.add(id(record))
            lent.append(id(record))

    def checkin(_dbapi: Any, record: Any) -> None:
        held.discard(id(record))

    event.listen(pool, "checkout", checkout)
    event.listen(pool, "checkin", checkin)
    path = "/agentic/tasks/org-alpha/t1/steps/s1"
    expert = two_orgs.expert_a.headers
    cases = [
        (f"{path}/approve", {}, None, 401, "unauthenticated"),
        (f"{path}/approve", two_orgs.viewer_a.headers, None, 403, "forbidden"),
        (f"{path}/approve", expert, None, 503, "kubernetes_unavailable"),
        (f"{path}/reject", expert, {}, 422, "validation_failed"),  # with a client, below
    ]
    try:
        for i, (url, headers, body, status, code) in enumerate(cases * 20):  # > the pool
            # a client that is never called: the body's validation fails after the checks
            KUBE.put(app.state, KubeClient(cast(Any, None)) if status == 422 else None)
            lent.clear()
            r = await client.post(url, headers=headers, json=body)
            assert (r.status_code, r.json()["code"]) == (status, code), r.text
            assert lent, "the positive control: the route took a connection"
            assert held == set(), (i, url, status)  # every one of them back
    finally:
        KUBE.put(app.state, None)
        event.remove(pool, "checkout", checkout)
        event.remove(pool, "checkin", checkin)
