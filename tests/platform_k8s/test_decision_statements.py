"""A decision's statements on PostgreSQL, and its guarantees from the attacker's side, all
through the route: an approval by the task's namespace sends the database two statements,
the caller's (which also reads the org of the path's namespace, its active flag and its
policy) and the audit row's append (no read of the org's policy of its own; the review
queue's resume is the same two; the route by the task's uid, whose path names no
namespace, still sends it: the fallback); a quorum the org's admin just raised holds at
the very next decision; a deactivated org's decision is refused (409 `org_deactivated`)
and, once reactivated, accepted; another org's namespace, a removed membership and a
deactivated user are refused at the next request; a path whose namespace no namespace can
have (a NUL, upper case, too long) is refused by the path's own check (422), never sent to
the database."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from asyncpg.connection import Connection
from fastapi import FastAPI
from sqlalchemy import event, func, select, text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from platform_api.db import ENGINE
from platform_api.models import AuditRecord
from tests.platform_k8s.conftest import Orgs, TaskApi, ticked

_MINE: contextvars.ContextVar[asyncio.Task[Any] | None] = contextvars.ContextVar(
    "mine", default=None
)
"""The task serving the test's own request while it runs (the platform's watch, notifier
and dispatcher send statements of their own, which are not counted)."""


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every statement the test's own requests sent while `_MINE` was set: straight to the
    driver (asyncpg's `fetch*` and `execute`) and through SQLAlchemy (its cursor)."""
    statements: list[str] = []

    def counting(name: str) -> None:
        original = getattr(Connection, name)

        async def call(self: Connection, query: str, *args: Any, **kwargs: Any) -> Any:
            if _MINE.get() is asyncio.current_task():
                statements.append(query)
            return await original(self, query, *args, **kwargs)

        monkeypatch.setattr(Connection, name, call)

    for name in ("fetch", "fetchrow", "fetchval", "execute", "executemany"):
        counting(name)
    yield statements


@pytest.fixture
def through_sqlalchemy(app: FastAPI) -> Iterator[list[str]]:
    """Every statement the test's own requests sent through SQLAlchemy."""
    engine = ENGINE.of(app.state)
    statements: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if _MINE.get() is asyncio.current_task():
            statements.append(statement)

    event.listen(engine.sync_engine, "before_cursor_execute", record)
    yield statements
    event.remove(engine.sync_engine, "before_cursor_execute", record)


async def _mine(call: Any) -> Any:
    token = _MINE.set(asyncio.current_task())
    try:
        return await call
    finally:
        _MINE.reset(token)


async def _sql(db: AsyncEngine, statement: str, **params: Any) -> None:
    async with db.begin() as conn:
        await conn.execute(text(statement), params)


async def _approvals(db: AsyncEngine, task_id: str) -> int:
    async with AsyncSession(db) as session:
        found = await session.scalar(
            select(func.count())
            .select_from(AuditRecord)
            .where(
                AuditRecord.action == "task.step.approve",
                AuditRecord.target == f"agentictask:{task_id}",
            )
        )
        return int(found or 0)


def _kinds(statements: list[str]) -> list[str]:
    """Each statement by what it is: the caller's (with the org's policy or not), the
    org's policy read, the audit append, or the statement itself."""
    out = []
    for s in statements:
        if "FROM users" in s:
            out.append("caller+policy" if "approval_policy" in s else "caller")
        elif "approval_policy" in s:
            out.append("policy")
        elif "INSERT INTO audit" in s:
            out.append("audit")
        else:
            out.append(s)
    return out


async def test_an_approval_sends_the_caller_with_the_policy_and_the_audit_row(
    tasks: TaskApi,
    orgs: Orgs,
    db: AsyncEngine,
    client: httpx.AsyncClient,
    sent: list[str],
    through_sqlalchemy: list[str],
) -> None:
    made = await tasks.create(orgs.requester, orgs.org_a)
    second = await tasks.create(orgs.requester, orgs.org_a)
    await tasks.until(orgs.expert, made["id"], ticked)
    await tasks.until(orgs.expert, second["id"], ticked)

    r = await _mine(tasks.decide(orgs.expert, made["id"], "read"))
    assert r.status_code == 200, r.text
    assert _kinds(sent) == ["caller+policy", "audit"]  # before: caller, policy, audit
    assert through_sqlalchemy == []
    assert await _approvals(db, made["id"]) == 1

    # the route by the task's uid names no namespace: the org's policy read of its own
    sent.clear()
    path = f"/agentic/tasks/{second['uid']}/steps/read/approve"
    by_uid = await _mine(client.post(path, json={}, headers=orgs.expert.headers))
    assert by_uid.status_code == 200, by_uid.text
    assert "policy" in _kinds(sent) and "caller" in _kinds(sent), _kinds(sent)
    assert await _approvals(db, second["id"]) == 1


async def test_the_review_queues_resume_sends_the_caller_with_the_policy_and_the_audit_row(
    tasks: TaskApi,
    orgs: Orgs,
    db: AsyncEngine,
    client: httpx.AsyncClient,
    sent: list[str],
) -> None:
    made = await tasks.create(orgs.requester, orgs.org_a)
    await tasks.until(orgs.expert, made["id"], ticked)
    path = f"/human-tasks/{made['id']}/read/resume"
    r = await _mine(client.post(path, json={"action": "approve"}, headers=orgs.expert.headers))
    assert r.status_code == 200, r.text
    assert _kinds(sent) == ["caller+policy", "audit"]  # the queue's route as the task's
    assert await _approvals(db, made["id"]) == 1


async def test_a_quorum_raised_by_the_orgs_admin_holds_at_the_next_decision(
    tasks: TaskApi, orgs: Orgs, client: httpx.AsyncClient
) -> None:
    before = await tasks.create(orgs.requester, orgs.org_a)
    after = await tasks.create(orgs.requester, orgs.org_a)
    await tasks.until(orgs.expert, before["id"], ticked)
    await tasks.until(orgs.expert, after["id"], ticked)
    one = await tasks.decide(orgs.expert, before["id"], "read")  # the default: one for high
    assert one.status_code == 200, one.text
    assert (one.json()["decided"], one.json()["required_approvals"]) == (True, 1)

    raised = await client.put(
        f"/orgs/{orgs.org_a}/policy",
        json={"requiredApprovals": {"high": 2}},
        headers=orgs.admin_a.headers,
    )
    assert raised.status_code == 200, raised.text
    first = await tasks.decide(orgs.expert, after["id"], "read")
    assert first.status_code == 200, first.text
    assert (first.json()["decided"], first.json()["required_approvals"]) == (False, 2)
    again = await tasks.decide(orgs.expert, after["id"], "read", key="another")
    assert again.status_code == 409, again.text  # the same expert does not count twice
    second = await tasks.decide(orgs.expert2, after["id"], "read")
    assert second.status_code == 200, second.text
    assert (second.json()["decided"], second.json()["approvals"]) == (True, 2)


async def test_a_deactivated_orgs_decision_is_refused_until_it_is_reactivated(
    tasks: TaskApi, orgs: Orgs, db: AsyncEngine
) -> None:
    made = await tasks.create(orgs.requester, orgs.org_a)
    await tasks.until(orgs.expert, made["id"], ticked)
    # the flag alone, as another replica's deactivation leaves it before its tasks are
    # cancelled: the decision reads it in the caller's statement
    off = "UPDATE orgs SET deactivated_at = {} WHERE id = CAST(:o AS uuid)"
    await _sql(db, off.format("now()"), o=orgs.org_a)
    refused = await tasks.decide(orgs.expert, made["id"], "read")
    assert refused.status_code == 409, refused.text
    body = refused.json()
    assert body["code"] == "org_deactivated"
    assert body["details"] == {"orgId": orgs.org_a}
    assert await _approvals(db, made["id"]) == 0

    await _sql(db, off.format("NULL"), o=orgs.org_a)
    accepted = await tasks.decide(orgs.expert, made["id"], "read")
    assert accepted.status_code == 200, accepted.text
    assert await _approvals(db, made["id"]) == 1


async def test_another_orgs_namespace_a_removed_member_and_a_deactivated_user(
    tasks: TaskApi, orgs: Orgs, db: AsyncEngine
) -> None:
    made = await tasks.create(orgs.requester, orgs.org_a)
    await tasks.until(orgs.expert, made["id"], ticked)
    name = made["name"]
    # org B's expert, on org A's task; org A's expert, on org B's namespace
    for caller, task_id in ((orgs.expert_b, made["id"]), (orgs.expert, f"{orgs.ns_b}/{name}")):
        r = await tasks.decide(caller, task_id, "read")
        assert (r.status_code, r.json()["code"]) == (404, "not_found"), r.text
        assert r.json()["message"] == "no such task"

    await _sql(
        db,
        "DELETE FROM memberships WHERE org_id = CAST(:o AS uuid) AND user_id = "
        "(SELECT id FROM users WHERE username = :u)",
        o=orgs.org_a,
        u=orgs.expert.username,
    )
    removed = await tasks.decide(orgs.expert, made["id"], "read")
    assert (removed.status_code, removed.json()["code"]) == (404, "not_found"), removed.text
    await _sql(
        db, "UPDATE users SET deactivated_at = now() WHERE username = :u", u=orgs.expert2.username
    )
    gone = await tasks.decide(orgs.expert2, made["id"], "read")
    assert (gone.status_code, gone.json()["code"]) == (401, "user_deactivated"), gone.text
    assert await _approvals(db, made["id"]) == 0
    # the positive control: a member that is neither decides
    ok = await tasks.decide(orgs.admin_a, made["id"], "read")
    assert ok.status_code == 200, ok.text
    assert await _approvals(db, made["id"]) == 1


async def test_a_namespace_no_namespace_can_have_is_refused_by_the_paths_check(
    tasks: TaskApi, orgs: Orgs, client: httpx.AsyncClient, db: AsyncEngine
) -> None:
    made = await tasks.create(orgs.requester, orgs.org_a)
    await tasks.until(orgs.expert, made["id"], ticked)
    namespace, name = made["id"].split("/")
    for bad in (f"{namespace}%00", namespace.upper(), namespace + "-" + "x" * 63):
        for path, body in (
            (f"/agentic/tasks/{bad}/{name}/steps/read/approve", {}),
            (f"/human-tasks/{bad}/{name}/read/resume", {"action": "approve"}),
        ):
            r = await client.post(path, json=body, headers=orgs.expert.headers)
            assert (r.status_code, r.json()["code"]) == (422, "validation_failed"), r.text
            # the path's own check, not the database's refusal of what it cannot store
            assert r.json()["details"]["errors"][0]["loc"] == ["path", "namespace"], r.text
    assert await _approvals(db, made["id"]) == 0
    # the positive control: the same task by its own namespace is decided
    ok = await tasks.decide(orgs.expert, made["id"], "read")
    assert ok.status_code == 200, ok.text
