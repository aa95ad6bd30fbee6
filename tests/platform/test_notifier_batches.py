"""The notifier records what queued up meanwhile in one transaction (issue 17), one task
whose events cannot be recorded does not hold back the others', and a notifier behind the
watch holds each task's waiting events once, however often the task changes meanwhile
(real PostgreSQL, `TaskNotifier` fed as the watch feeds it)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from sqlalchemy import delete, func, select, text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from humanwork_core.resources import AgenticTask
from platform_api.db import make_engine, make_sessionmaker
from platform_api.models import NotifyEvent, Org
from platform_api.notify import watch
from platform_api.notify.delivery import Deliverer
from platform_api.notify.wakeup import QUEUED
from platform_api.notify.watch import TaskNotifier
from tests.platform.conftest import make_settings

STEP = {"id": "refund", "description": "Refund", "tool": "shopify_refund", "risk": "high"}


def _task(org: Org, name: str, uid: str | None = None, decided: int = 0) -> AgenticTask:
    """A task of `org` whose one step waits for a decision (one event: decision needed);
    with `decided`, its step approved (one event: decided) at resourceVersion `decided`."""
    status: dict[str, Any] = {"phase": "PendingApproval", "steps": [{"id": "refund"}]}
    if decided:
        decision = {"verdict": "approve", "by": "expert-a", "at": datetime.now(UTC).isoformat(),
                    "idempotencyKey": "k-1", "stepHash": "0" * 64}  # fmt: skip
        status = {"phase": "InProgress", "steps": [{"id": "refund", "decision": decision}]}
    meta = {"name": name, "namespace": org.namespace, "uid": uid or str(uuid.uuid4())}
    return AgenticTask.from_wire(
        {
            "apiVersion": "humanwork.io/v1alpha1",
            "kind": "AgenticTask",
            "metadata": {**meta, "resourceVersion": str(decided or 1)},
            "spec": {
                "orgId": str(org.id),
                "agentRef": {"name": "shop"},
                "description": f"Refund {name}",
                "requestedBy": "requester",
                "steps": [STEP],
            },
            "status": status,
        }
    )


@pytest.fixture
async def sessions(database_url: str) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    engine = make_engine(database_url)
    yield make_sessionmaker(engine)
    await engine.dispose()


async def _orgs(sessions: async_sessionmaker[AsyncSession], count: int) -> list[Org]:
    made = [
        Org(slug=f"o{i}-{uuid.uuid4().hex[:6]}", name=f"Org {i}", namespace=f"org-n{i}-{i}")
        for i in range(count)
    ]
    async with sessions() as session, session.begin():
        session.add_all(made)
    return made


async def _events(sessions: async_sessionmaker[AsyncSession], org: Org) -> int:
    async with sessions() as session:
        query = select(func.count()).where(NotifyEvent.org_id == org.id)
        return int(await session.scalar(query) or 0)


async def _commits(sessions: async_sessionmaker[AsyncSession]) -> int:
    async with sessions() as session:
        query = text("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
        return int(await session.scalar(query) or 0)


@contextlib.asynccontextmanager
async def _running(notifier: TaskNotifier) -> AsyncIterator[None]:
    runner = asyncio.create_task(notifier.run())
    try:
        yield
    finally:
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner


async def _until(check: Any) -> None:
    """Poll the database (its rows are what is checked) for 15 s at most."""
    for _ in range(150):
        if await check():
            return
        await asyncio.sleep(0.1)
    raise AssertionError("not within 15 s")


async def test_events_queued_together_are_recorded_once_in_few_transactions(
    database_url: str, sessions: async_sessionmaker[AsyncSession]
) -> None:
    (org,) = await _orgs(sessions, 1)
    settings = make_settings(database_url, notify_interval_seconds=3600)
    notifier = TaskNotifier(sessions, settings, deliverer=None)
    for i in range(60):
        notifier.observe(_task(org, f"t{i}"))
    await asyncio.sleep(1.5)  # pg_stat_database is reported with a delay: settle it first
    before = await _commits(sessions)
    async with _running(notifier):
        await _until(lambda: _at_least(sessions, org, 60))
        await asyncio.sleep(1.0)
    for i in range(60):  # seen again (a relist): nothing is recorded twice
        notifier.observe(_task(org, f"t{i}"))
    assert await _events(sessions, org) == 60
    await asyncio.sleep(1.0)
    commits = await _commits(sessions) - before
    # one transaction per task would be 60 commits or more; the counting reads commit too
    assert commits < 20, commits


async def _at_least(sessions: async_sessionmaker[AsyncSession], org: Org, count: int) -> bool:
    return await _events(sessions, org) >= count


async def test_a_task_whose_events_fail_does_not_hold_back_the_others(
    database_url: str, sessions: async_sessionmaker[AsyncSession]
) -> None:
    gone, kept = await _orgs(sessions, 2)
    settings = make_settings(database_url, notify_interval_seconds=0.2)
    notifier = TaskNotifier(sessions, settings, deliverer=None)
    async with _running(notifier):
        notifier.observe(_task(gone, "first"))  # the notifier learns the org's namespace
        await _until(lambda: _at_least(sessions, gone, 1))
        async with sessions() as session, session.begin():
            await session.execute(delete(Org).where(Org.id == gone.id))
        # the deleted org's events now violate the event log's foreign key; queued first,
        # they share a transaction with the others'
        notifier.observe(_task(gone, "second"))
        for i in range(5):
            notifier.observe(_task(kept, f"k{i}"))
        await _until(lambda: _at_least(sessions, kept, 5))
    assert await _events(sessions, kept) == 5
    assert await _events(sessions, gone) == 0  # cascaded away with its org


async def test_a_task_changing_while_its_events_wait_is_held_once(
    database_url: str, sessions: async_sessionmaker[AsyncSession]
) -> None:
    """The soak's platform grew with its notifier's backlog: each change of a task whose
    events were not yet recorded queued all of them again."""
    (org,) = await _orgs(sessions, 1)
    settings = make_settings(database_url, notify_interval_seconds=3600)
    notifier = TaskNotifier(sessions, settings, deliverer=None)
    uid = str(uuid.uuid4())
    for version in range(1, 201):  # 200 changes of one task, the last 199 of them decided
        notifier.observe(_task(org, "busy", uid, decided=version - 1))
    for i in range(20):  # and 20 tasks seen three times each (changes, relists)
        for _ in range(3):
            notifier.observe(_task(org, f"t{i}", str(uuid.uuid5(uuid.NAMESPACE_OID, str(i)))))
    assert notifier.backlog == 21  # one waiting batch per task
    async with _running(notifier):
        await _until(lambda: _at_least(sessions, org, 22))
    assert notifier.backlog == 0
    async with sessions() as session:
        found = (
            await session.scalars(select(NotifyEvent).where(NotifyEvent.org_id == org.id))
        ).all()
    busy = sorted(e.event for e in found if e.event_id.startswith(uid))
    assert busy == ["decided", "decision_needed"]  # both versions' events, each once
    assert len(found) == 22


def _ended(org: Org, name: str, uid: str) -> AgenticTask:
    """The task of `_task(org, name, uid, decided=2)`, completed."""
    wire = _task(org, name, uid, decided=2).to_wire()
    wire["metadata"]["resourceVersion"] = "3"
    wire["status"]["phase"] = "Completed"
    return AgenticTask.from_wire(wire)


async def test_an_ended_task_is_forgotten_and_seen_again_records_nothing_twice(
    database_url: str, sessions: async_sessionmaker[AsyncSession]
) -> None:
    """What the notifier remembers follows the open tasks: the soak's platform kept every
    recorded event's id (up to 100,000) for ever."""
    (org,) = await _orgs(sessions, 1)
    settings = make_settings(database_url, notify_interval_seconds=3600)
    notifier = TaskNotifier(sessions, settings, deliverer=None)
    uid = str(uuid.uuid4())
    async with _running(notifier):
        notifier.observe(_task(org, "open", uid))
        await _until(_remembers(notifier, 1))  # its decision_needed, while it is open
        notifier.observe(_ended(org, "open", uid))
        await _until(lambda: _at_least(sessions, org, 4))  # decided, completed, request_ended
        recorded = await _events(sessions, org)
        for _ in range(3):
            notifier.observe(_ended(org, "open", uid))  # seen again (a change, a relist)
        notifier.observe(_task(org, "control"))  # queued after them: recorded after them
        await _until(lambda: _at_least(sessions, org, recorded + 1))
        # the control's; the ended task's ids are gone (the control is remembered after its
        # transaction, which came after the ended task's sightings)
        await _until(_remembers(notifier, 1))
    assert await _events(sessions, org) == recorded + 1  # the control's event only
    notifier.forget((org.namespace, "control"))  # deleted from the cluster
    assert notifier.remembered == 0


def _remembers(notifier: TaskNotifier, count: int) -> Any:
    async def check() -> bool:
        return notifier.remembered == count

    return check


async def test_the_event_log_is_pruned_once_a_minute_not_on_every_wake_up(
    sessions: async_sessionmaker[AsyncSession], database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (org,) = await _orgs(sessions, 1)
    settings = make_settings(database_url, notify_retention_seconds=3600)
    notifier = TaskNotifier(sessions, settings, deliverer=None)
    now = datetime.now(UTC)
    clock = [now]
    monkeypatch.setattr(watch, "utcnow", lambda: clock[0])

    async def old_event(event_id: str) -> None:
        async with sessions() as session, session.begin():
            session.add(
                NotifyEvent(
                    org_id=org.id,
                    event_id=event_id,
                    event="decision_needed",
                    payload={},
                    created_at=now - timedelta(hours=2),
                )
            )

    await old_event("old-1")
    await notifier.tick()
    assert await _events(sessions, org) == 0  # the first look prunes
    await old_event("old-2")
    clock[0] = now + timedelta(seconds=30)
    await notifier.tick()  # a wake-up within the minute: no sweep
    assert await _events(sessions, org) == 1
    clock[0] = now + watch.PRUNE_EVERY + timedelta(seconds=1)
    await notifier.tick()
    assert await _events(sessions, org) == 0


class _CountingDeliverer:
    """Counts the deliverer's claims (none due: each claims nothing)."""

    def __init__(self) -> None:
        self.claims = 0

    async def run_once(self) -> int:
        self.claims += 1
        return 0


async def test_a_wake_up_claims_deliveries_only_when_one_was_queued_or_a_look_is_due(
    sessions: async_sessionmaker[AsyncSession], database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = make_settings(database_url, notify_interval_seconds=2.0)
    deliverer = _CountingDeliverer()
    notifier = TaskNotifier(sessions, settings, deliverer=cast(Deliverer, deliverer))
    now = datetime.now(UTC)
    clock = [now]
    monkeypatch.setattr(watch, "utcnow", lambda: clock[0])
    await notifier.tick()
    assert deliverer.claims == 1  # the first look
    clock[0] = now + timedelta(seconds=0.5)
    await notifier.tick()  # woken by an event that queued no delivery
    assert deliverer.claims == 1
    QUEUED.notify()  # a commit of this replica queued one
    await notifier.tick()
    assert deliverer.claims == 2
    clock[0] = now + timedelta(seconds=2.6)  # the periodic look: retries, other replicas'
    await notifier.tick()
    assert deliverer.claims == 3


async def test_many_tasks_events_are_logged_once_and_seen_again_add_nothing(
    database_url: str, sessions: async_sessionmaker[AsyncSession]
) -> None:
    """Their batch is one statement (`test_notifier_statement`: one round trip)."""
    (org,) = await _orgs(sessions, 1)
    settings = make_settings(database_url, notify_interval_seconds=3600)
    notifier = TaskNotifier(sessions, settings, deliverer=None)
    for i in range(40):
        notifier.observe(_task(org, f"m{i}", uid=f"uid-m{i}"))
    async with _running(notifier):
        await _until(lambda: _at_least(sessions, org, 40))
    # the same tasks again (a relist): every event a no-op, nothing logged twice
    for i in range(40):
        notifier.forget((org.namespace, f"m{i}"))
        notifier.observe(_task(org, f"m{i}", uid=f"uid-m{i}"))
    async with _running(notifier):
        await asyncio.sleep(1.0)
    assert await _events(sessions, org) == 40
