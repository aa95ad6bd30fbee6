"""A decision request's transactions on PostgreSQL (`platform_api.tasks.autocommit`): an
approval that writes one audit row opens no transaction around the request (no BEGIN and
COMMIT round trips), and a rejection, whose feedback is a correction, stores the audit
row, the correction and the correction's row in one explicit transaction."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Iterator
from typing import Any

import pytest
from asyncpg.transaction import Transaction
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from platform_api.floor.audit.service import verify
from platform_api.models import AuditRecord, ExpertCorrection
from tests.platform_k8s.conftest import Orgs, TaskApi, ticked

_MINE: contextvars.ContextVar[asyncio.Task[Any] | None] = contextvars.ContextVar(
    "mine", default=None
)
"""The task serving the test's own request while it runs: the platform's background tasks
(the notifier, the watch, the corrections' push a decision starts) open transactions of
their own, which are not counted."""


@pytest.fixture
def begun(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The transactions asyncpg began while `_MINE` was set."""
    started: list[str] = []
    original = Transaction.start

    async def start(self: Transaction) -> None:
        if _MINE.get() is asyncio.current_task():
            started.append("begin")
        await original(self)

    monkeypatch.setattr(Transaction, "start", start)
    yield started


async def _decide(tasks: TaskApi, *args: Any, **kwargs: Any) -> Any:
    token = _MINE.set(asyncio.current_task())
    try:
        return await tasks.decide(*args, **kwargs)
    finally:
        _MINE.reset(token)


async def _count(db: AsyncEngine, *where: Any, of: Any = AuditRecord) -> int:
    async with AsyncSession(db) as session:
        return int(await session.scalar(select(func.count()).select_from(of).where(*where)) or 0)


async def test_an_approval_begins_no_transaction(
    tasks: TaskApi, orgs: Orgs, db: AsyncEngine, begun: list[str]
) -> None:
    made = await tasks.create(orgs.requester, orgs.org_a)
    await tasks.until(orgs.expert, made["id"], ticked)

    r = await _decide(tasks, orgs.expert, made["id"], "read")
    assert r.status_code == 200, r.text
    assert begun == []  # the caller, the org's policy and the audit row: no BEGIN, no COMMIT
    target = AuditRecord.target == f"agentictask:{made['id']}"
    assert await _count(db, AuditRecord.action == "task.step.approve", target) == 1

    # a refusal still answers as before and writes no decision row
    again = await _decide(tasks, orgs.expert, made["id"], "read", body={"feedback": "x"}, key="k")
    assert again.status_code == 409, again.text
    assert await _count(db, AuditRecord.action == "task.step.approve", target) == 1


async def test_a_rejection_stores_its_correction_with_its_rows_in_one_transaction(
    tasks: TaskApi, orgs: Orgs, db: AsyncEngine, begun: list[str]
) -> None:
    made = await tasks.create(orgs.requester, orgs.org_a)
    await tasks.until(orgs.expert, made["id"], ticked)

    r = await _decide(tasks, orgs.expert, made["id"], "read", "reject", {"feedback": "September"})
    assert r.status_code == 200, r.text
    assert begun == ["begin"]  # one explicit transaction: the rows below, all or none
    target = AuditRecord.target == f"agentictask:{made['id']}"
    assert await _count(db, AuditRecord.action == "task.step.reject", target) == 1
    source = ExpertCorrection.source == f"step:{made['id']}/read"
    assert await _count(db, source, of=ExpertCorrection) == 1
    assert await _count(db, AuditRecord.action == "correction.recorded") == 1
    async with AsyncSession(db) as session:
        assert await verify(session) == []
