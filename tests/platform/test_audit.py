"""The audit log: `GET /audit` (filters, pagination, scoping), the hash chain and its
verification (altered, removed, reordered rows), and the verify command."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from asyncpg.transaction import Transaction
from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from platform_api.audit.cli import verify_database
from platform_api.db import SESSIONS, autocommit_driver
from platform_api.floor.audit.chain import GENESIS, content_of, row_hash
from platform_api.floor.audit.service import record
from platform_api.tasks.autocommit import autocommitting, together
from tests.platform.conftest import Api, TwoOrgs


@asynccontextmanager
async def tampering(db: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """A transaction with the append-only triggers off, as only the database owner can."""
    async with db.begin() as conn:
        await conn.execute(text("SET LOCAL session_replication_role = replica"))
        yield conn


async def _toggle(client: httpx.AsyncClient, orgs: TwoOrgs, times: int) -> None:
    for i in range(times):
        r = await client.put(
            f"/orgs/{orgs.org_a}/tool-permissions/{('shopify', 'amazon')[i % 2]}",
            json={"enabled": i % 2 == 0},
            headers=orgs.admin_a.headers,
        )
        assert r.status_code == 200


async def test_audit_lists_the_callers_orgs_newest_first(
    client: httpx.AsyncClient, two_orgs: TwoOrgs
) -> None:
    await _toggle(client, two_orgs, 3)
    r = await client.get("/audit", headers=two_orgs.admin_a.headers)
    assert r.status_code == 200
    page = r.json()
    items = page["items"]
    assert {i["org_id"] for i in items} == {two_orgs.org_a}
    assert [i["action"] for i in items[:3]] == ["tool_permission.updated"] * 3
    assert [i["target"] for i in items[:3]] == ["tool:shopify", "tool:amazon", "tool:shopify"]
    # the third toggle found shopify enabled by the first: newest first
    assert [i["details"]["previously_enabled"] for i in items[:3]] == [True, None, None]
    assert [i["at"] for i in items] == sorted((i["at"] for i in items), reverse=True)
    seqs = sorted(i["seq"] for i in items)
    assert seqs == list(range(1, len(items) + 1))
    by_seq = {i["seq"]: i for i in items}
    for seq in seqs[1:]:
        assert by_seq[seq]["prev_hash"] == by_seq[seq - 1]["hash"]
    assert by_seq[1]["prev_hash"] == GENESIS
    assert page["total"] == len(items) and page["next_offset"] is None


async def test_audit_filters_and_pagination(client: httpx.AsyncClient, two_orgs: TwoOrgs) -> None:
    h = two_orgs.admin.headers  # member of both orgs
    await _toggle(client, two_orgs, 5)
    everything = (await client.get("/audit", params={"limit": 500}, headers=h)).json()
    assert {i["org_id"] for i in everything["items"]} == {two_orgs.org_a, two_orgs.org_b}
    only_b = (await client.get("/audit", params={"org": two_orgs.org_b}, headers=h)).json()
    assert only_b["items"] and {i["org_id"] for i in only_b["items"]} == {two_orgs.org_b}
    toggles = (
        await client.get("/audit", params={"action": "tool_permission.updated"}, headers=h)
    ).json()
    assert toggles["total"] == 5
    pages, offset = [], 0
    while offset is not None:
        page = (
            await client.get(
                "/audit",
                params={"action": "tool_permission.updated", "limit": 2, "offset": offset},
                headers=h,
            )
        ).json()
        assert page["total"] == 5 and len(page["items"]) <= 2
        pages.append([i["id"] for i in page["items"]])
        offset = page["next_offset"]
    assert [len(p) for p in pages] == [2, 2, 1]
    assert [i for p in pages for i in p] == [i["id"] for i in toggles["items"]]
    middle = toggles["items"][2]["at"]
    since = (
        await client.get(
            "/audit",
            params={"action": "tool_permission.updated", "since": middle},
            headers=h,
        )
    ).json()
    until = (
        await client.get(
            "/audit",
            params={"action": "tool_permission.updated", "until": middle},
            headers=h,
        )
    ).json()
    assert since["total"] == 3 and until["total"] == 2
    future = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    assert (await client.get("/audit", params={"since": future}, headers=h)).json()["total"] == 0


async def test_audit_refuses_a_foreign_org_filter_and_bad_parameters(
    client: httpx.AsyncClient, two_orgs: TwoOrgs
) -> None:
    h = two_orgs.admin_b.headers
    r = await client.get("/audit", params={"org": two_orgs.org_a}, headers=h)
    assert r.status_code == 404 and r.json()["code"] == "not_found"
    for params in ({"limit": 0}, {"limit": 501}, {"offset": -1}, {"since": "yesterday"}):
        r = await client.get("/audit", params=params, headers=h)
        assert r.status_code == 422 and r.json()["code"] == "validation_failed", params


async def test_chain_verifies_when_intact(
    client: httpx.AsyncClient, two_orgs: TwoOrgs, database_url: str
) -> None:
    await _toggle(client, two_orgs, 3)
    assert await verify_database(database_url) == []


async def _row(db: AsyncEngine, org: str, seq: int) -> int:
    async with db.connect() as conn:
        row_id: int = (
            await conn.execute(
                text("SELECT id FROM audit_log WHERE chain = :c AND seq = :s"),
                {"c": org, "s": seq},
            )
        ).scalar_one()
    return row_id


async def test_verify_detects_an_altered_row(
    client: httpx.AsyncClient, two_orgs: TwoOrgs, database_url: str, db: AsyncEngine
) -> None:
    await _toggle(client, two_orgs, 3)
    row_id = await _row(db, two_orgs.org_a, 2)
    async with tampering(db) as conn:
        await conn.execute(
            text("UPDATE audit_log SET actor = 'someone-else' WHERE id = :i"), {"i": row_id}
        )
    problems = await verify_database(database_url)
    assert [(p.chain, p.seq, p.kind) for p in problems] == [(two_orgs.org_a, 2, "altered")]


async def test_verify_detects_a_rehashed_altered_row(
    client: httpx.AsyncClient, two_orgs: TwoOrgs, database_url: str, db: AsyncEngine
) -> None:
    """Recomputing the tampered row's own hash does not help: the next row's link breaks."""
    await _toggle(client, two_orgs, 3)
    async with tampering(db) as conn:
        r = (
            await conn.execute(
                text("SELECT * FROM audit_log WHERE chain = :c AND seq = 2"),
                {"c": two_orgs.org_a},
            )
        ).one()
        content = content_of(
            chain=r.chain,
            seq=r.seq,
            org_id=str(r.org_id),
            at=r.at,
            actor="someone-else",
            action=r.action,
            target=r.target,
            outcome=r.outcome,
            details=r.details,
        )
        await conn.execute(
            text("UPDATE audit_log SET actor = 'someone-else', hash = :h WHERE id = :i"),
            {"h": row_hash(content, r.prev_hash), "i": r.id},
        )
    problems = await verify_database(database_url)
    assert (two_orgs.org_a, 3, "broken_link") in [(p.chain, p.seq, p.kind) for p in problems]


async def test_verify_detects_a_removed_row(
    client: httpx.AsyncClient, two_orgs: TwoOrgs, database_url: str, db: AsyncEngine
) -> None:
    await _toggle(client, two_orgs, 3)
    row_id = await _row(db, two_orgs.org_a, 2)
    async with tampering(db) as conn:
        await conn.execute(text("DELETE FROM audit_log WHERE id = :i"), {"i": row_id})
    kinds = {(p.seq, p.kind) for p in await verify_database(database_url)}
    assert {(3, "missing"), (3, "broken_link")} <= kinds


async def test_verify_detects_a_removed_last_row(
    client: httpx.AsyncClient, two_orgs: TwoOrgs, database_url: str, db: AsyncEngine
) -> None:
    await _toggle(client, two_orgs, 3)
    async with tampering(db) as conn:
        last = (
            await conn.execute(
                text("SELECT max(seq) FROM audit_log WHERE chain = :c"), {"c": two_orgs.org_a}
            )
        ).scalar_one()
        await conn.execute(
            text("DELETE FROM audit_log WHERE chain = :c AND seq = :s"),
            {"c": two_orgs.org_a, "s": last},
        )
    problems = await verify_database(database_url)
    assert [(p.chain, p.kind) for p in problems] == [(two_orgs.org_a, "head")]


async def test_verify_detects_reordered_rows(
    client: httpx.AsyncClient, two_orgs: TwoOrgs, database_url: str, db: AsyncEngine
) -> None:
    await _toggle(client, two_orgs, 3)
    a, b = await _row(db, two_orgs.org_a, 2), await _row(db, two_orgs.org_a, 3)
    async with tampering(db) as conn:
        await conn.execute(text("UPDATE audit_log SET seq = -1 WHERE id = :i"), {"i": a})
        await conn.execute(text("UPDATE audit_log SET seq = 2 WHERE id = :i"), {"i": b})
        await conn.execute(text("UPDATE audit_log SET seq = 3 WHERE id = :i"), {"i": a})
    problems = await verify_database(database_url)
    assert problems
    assert {p.seq for p in problems} >= {2, 3}
    assert "altered" in {p.kind for p in problems}


async def test_verify_command_exit_status(
    client: httpx.AsyncClient, two_orgs: TwoOrgs, database_url: str, db: AsyncEngine
) -> None:
    await _toggle(client, two_orgs, 2)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, *args, "--database-url", database_url],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    ok = await asyncio.to_thread(run, "-m", "platform_api.audit", "verify")
    assert ok.returncode == 0, ok.stderr
    assert "intact" in ok.stdout
    row_id = await _row(db, two_orgs.org_a, 1)
    async with tampering(db) as conn:
        await conn.execute(
            text("UPDATE audit_log SET details = CAST('{}' AS json) WHERE id = :i"), {"i": row_id}
        )
    bad = await asyncio.to_thread(run, "-m", "platform_api.audit", "verify")
    assert bad.returncode == 1
    assert f"{two_orgs.org_a} #1: altered" in bad.stderr
    main = await asyncio.to_thread(run, "-m", "platform_api.main", "audit-verify")
    assert main.returncode == 1 and "altered" in main.stderr


async def test_concurrent_appends_keep_one_unbroken_chain(
    app: FastAPI, api: Api, database_url: str
) -> None:
    admin = await api.admin()
    org = await api.org(admin, "busy")
    sessions = SESSIONS.of(app.state)

    async def append(i: int) -> None:
        async with sessions() as session, session.begin():
            await record(
                session, actor=f"a{i}", action="test.event", target=f"t{i}", org_id=uuid.UUID(org)
            )

    await asyncio.gather(*(append(i) for i in range(20)))
    assert await verify_database(database_url) == []
    async with sessions() as session:
        seqs = (
            await session.execute(
                text("SELECT seq FROM audit_log WHERE chain = :c ORDER BY seq"), {"c": org}
            )
        ).scalars()
        assert list(seqs) == list(range(1, 22))  # org.created + 20


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE audit_log SET actor = 'x'",
        "DELETE FROM audit_log",
        "TRUNCATE audit_log",
    ],
)
async def test_audit_log_is_append_only_in_the_database(
    client: httpx.AsyncClient, two_orgs: TwoOrgs, db: AsyncEngine, statement: str
) -> None:
    await _toggle(client, two_orgs, 1)
    with pytest.raises(DBAPIError, match="append-only"):
        async with db.begin() as conn:
            await conn.execute(text(statement))
    async with db.connect() as conn:
        assert (await conn.execute(text("SELECT count(*) FROM audit_log"))).scalar_one() > 1


async def test_appends_of_sessions_that_autocommit_keep_one_chain(
    app: FastAPI, api: Api, database_url: str
) -> None:
    """The decision routes' session runs each statement on its own (`tasks.autocommit`):
    its appends go to the driver directly, interleaved with sessions in a transaction, and
    the chain stays one; what `together` holds rolls back with the block."""
    admin = await api.admin()
    org = uuid.UUID(await api.org(admin, "lean"))
    sessions = SESSIONS.of(app.state)

    async def append(i: int) -> None:
        details = {"i": i, "text": "é ✓", "nested": {"b": [1, None, True]}}
        if i % 2:
            async with sessions() as session:
                await autocommitting(session)
                assert autocommit_driver(session) is not None
                made = await record(
                    session,
                    actor=f"a{i}",
                    action="lean.event",
                    target="t",
                    org_id=org,
                    details=details,
                )  # no commit: the statement committed on its own
                assert made.at is not None and made.at.tzinfo is not None
                await session.commit()  # as `deciding` does; the driver is no longer lent
                assert autocommit_driver(session) is None
                return
        async with sessions() as session, session.begin():
            await record(
                session,
                actor=f"a{i}",
                action="lean.event",
                target="t",
                org_id=org,
                details=details,
            )

    await asyncio.gather(*(append(i) for i in range(20)))
    async with sessions() as session:
        await autocommitting(session)
        with pytest.raises(RuntimeError):
            async with together(session):
                await record(session, actor="x", action="lean.undone", target="t", org_id=org)
                raise RuntimeError("the block fails")
        await record(session, actor="x", action="lean.kept", target="t", org_id=org)
    assert await verify_database(database_url) == []
    async with sessions() as session:
        rows = (
            await session.execute(
                text("SELECT action, details FROM audit_log WHERE chain = :c ORDER BY seq"),
                {"c": str(org)},
            )
        ).all()
    actions = [action for action, _ in rows]
    assert actions.count("lean.event") == 20 and "lean.undone" not in actions
    assert actions[-1] == "lean.kept"
    assert {details["i"] for action, details in rows if action == "lean.event"} == set(range(20))
    assert all(
        details["text"] == "é ✓" and details["nested"] == {"b": [1, None, True]}
        for action, details in rows
        if action == "lean.event"
    )


async def test_a_together_block_whose_rollback_fails_gives_its_connection_up(
    app: FastAPI, api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The explicit transaction of `together` is the driver's: the pool does not know it.
    When its rollback does not finish, the connection is invalidated, not pooled again
    inside a transaction whose statements would then never commit."""
    admin = await api.admin()
    org = uuid.UUID(await api.org(admin, "stuck"))
    sessions = SESSIONS.of(app.state)

    async def lost(self: object) -> None:
        raise ConnectionError("the rollback did not finish")

    async with sessions() as session:
        await autocommitting(session)
        driver = autocommit_driver(session)
        assert driver is not None
        with monkeypatch.context() as patch:
            patch.setattr(Transaction, "_Transaction__rollback", lost)
            with pytest.raises(ConnectionError):
                async with together(session):
                    await record(session, actor="x", action="stuck.row", target="t", org_id=org)
                    raise RuntimeError("the block fails")
        assert driver.is_closed()  # invalidated: never lent again
    async with sessions() as session:
        await autocommitting(session)
        await record(session, actor="x", action="stuck.after", target="t", org_id=org)
    async with sessions() as session:
        actions = (
            await session.execute(
                text("SELECT action FROM audit_log WHERE chain = :c ORDER BY seq"),
                {"c": str(org)},
            )
        ).scalars()
        found = list(actions)
    assert "stuck.row" not in found and found[-1] == "stuck.after"
