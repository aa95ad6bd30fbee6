"""The notifier's batch on PostgreSQL is one statement that commits on its own
(`notify.batch_sql`): no BEGIN, no COMMIT, no webhook read of its own; its events, their
webhook deliveries and their conversation messages land together or not at all, each
once however often the task is seen; on SQLite the batch is one transaction as before
(real PostgreSQL; a SQLite file migrated as the embedded default is)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from asyncpg.connection import Connection
from asyncpg.prepared_stmt import PreparedStatement
from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from humanwork_core.resources import AgenticTask
from platform_api.db import make_engine, make_sessionmaker, migrate
from platform_api.models import Conversation, Message, NotifyEvent, Org, Webhook, WebhookDelivery
from platform_api.notify.watch import TaskNotifier
from tests.platform.conftest import make_settings
from tests.platform.test_notifier_batches import _events, _orgs, _task, _until, sessions

__all__ = ["sessions"]  # the fixture, shared with the batches' tests

_SENDS = {
    Connection: ("execute", "executemany", "fetch", "fetchrow", "fetchval"),
    PreparedStatement: ("executemany", "fetch", "fetchrow", "fetchval"),
}
"""The driver's calls that each make one round trip to the server (a BEGIN and a COMMIT
are `Connection.execute`s)."""


class _RoundTrips:
    """The statements asyncpg sent for one asyncio task (the notifier's worker)."""

    def __init__(self) -> None:
        self.owner: asyncio.Task[Any] | None = None
        self.sent: list[str] = []


@pytest.fixture
def round_trips(monkeypatch: pytest.MonkeyPatch) -> Iterator[_RoundTrips]:
    seen = _RoundTrips()
    for cls, names in _SENDS.items():
        for name in names:
            original = getattr(cls, name)

            def counted(self: Any, *args: Any, _original: Any = original, **kw: Any) -> Any:
                if seen.owner is not None and asyncio.current_task() is seen.owner:
                    query = self.get_query() if isinstance(self, PreparedStatement) else args[0]
                    seen.sent.append(" ".join(str(query).split())[:60])
                return _original(self, *args, **kw)

            monkeypatch.setattr(cls, name, counted)
    yield seen


@contextlib.asynccontextmanager
async def _worker(notifier: TaskNotifier, trips: _RoundTrips | None = None) -> AsyncIterator[None]:
    runner = asyncio.create_task(notifier.run())
    if trips is not None:
        trips.owner = runner
    try:
        yield
    finally:
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner


async def test_a_batch_is_one_statement_without_begin_or_commit(
    database_url: str, sessions: async_sessionmaker[AsyncSession], round_trips: _RoundTrips
) -> None:
    (org,) = await _orgs(sessions, 1)
    settings = make_settings(database_url, notify_interval_seconds=3600)
    notifier = TaskNotifier(sessions, settings, deliverer=None)
    async with _worker(notifier):  # the org's namespace read once, then known
        notifier.observe(_task(org, "first"))
        await _until(lambda: _at_least(sessions, org, 1))
    for i in range(40):
        notifier.observe(_task(org, f"m{i}"))
    async with _worker(notifier, round_trips):
        await _until(lambda: _at_least(sessions, org, 41))
        await asyncio.sleep(0.2)  # nothing else follows
    # the 40 tasks' events queued before the worker ran: one batch, one round trip (it
    # was BEGIN, the insert, the webhook read and COMMIT)
    assert len(round_trips.sent) == 1, round_trips.sent
    assert round_trips.sent[0].startswith("WITH given AS")
    assert await _events(sessions, org) == 41


async def _at_least(sessions: async_sessionmaker[AsyncSession], org: Org, count: int) -> bool:
    return await _events(sessions, org) >= count


async def _count(sessions: async_sessionmaker[AsyncSession], model: Any, *where: Any) -> int:
    async with sessions() as session:
        return int(await session.scalar(select(func.count()).select_from(model).where(*where)))


def _in_conversation(org: Org, name: str, conversation: uuid.UUID) -> AgenticTask:
    wire = _task(org, name, uid=f"uid-{name}").to_wire()
    wire["spec"]["conversationId"] = str(conversation)
    return AgenticTask.from_wire(wire)


async def _hooked(sessions: async_sessionmaker[AsyncSession], org: Org, other: Org) -> list[Any]:
    """A webhook of `org` for decisions waiting, a conversation of each org."""
    mine, theirs = (
        Conversation(org_id=org.id, subject="mine"),
        Conversation(org_id=other.id, subject="theirs"),
    )
    hook = Webhook(
        org_id=org.id,
        url="https://hooks.example.test/in",
        events=["decision_needed"],
        secret=b"s",
        updated_by="admin",
    )
    async with sessions() as session, session.begin():
        session.add_all([mine, theirs, hook])
    return [mine.id, theirs.id]


async def test_events_deliveries_and_messages_land_together_once(
    database_url: str, sessions: async_sessionmaker[AsyncSession]
) -> None:
    org, other = await _orgs(sessions, 2)
    mine, theirs = await _hooked(sessions, org, other)
    settings = make_settings(database_url, notify_interval_seconds=0.2)  # the retry's pause
    notifier = TaskNotifier(sessions, settings, deliverer=None)
    # a trigger refuses the message: the statement fails, so nothing of the batch lands
    async with sessions() as session, session.begin():
        await session.execute(text(_REFUSE))
        await session.execute(text(_TRIGGER))
    notifier.observe(_in_conversation(org, "a", mine))
    notifier.observe(_in_conversation(org, "b", theirs))  # another org's conversation
    async with _worker(notifier):
        # "b" (no message of its own) lands once the batches are tried one by one
        await _until(lambda: _at_least(sessions, org, 1))
        await asyncio.sleep(0.5)
        a_event = NotifyEvent.event_id.startswith("uid-a")
        a_delivery = WebhookDelivery.event_id.startswith("uid-a")
        assert await _count(sessions, NotifyEvent, a_event) == 0  # nothing of "a"'s batch
        assert await _count(sessions, WebhookDelivery, a_delivery) == 0
        assert await _count(sessions, Message) == 0
        assert await _count(sessions, WebhookDelivery) == 1  # "b"'s
        async with sessions() as session, session.begin():  # the retry then lands it all
            await session.execute(text("DROP TRIGGER refuse_messages ON messages"))
        await _until(lambda: _at_least(sessions, org, 2))
        for name in ("a", "b"):  # seen again (a relist): nothing twice
            notifier.forget((org.namespace, name))
        notifier.observe(_in_conversation(org, "a", mine))
        notifier.observe(_in_conversation(org, "b", theirs))
        await asyncio.sleep(1.0)
    assert await _events(sessions, org) == 2
    assert await _count(sessions, WebhookDelivery, WebhookDelivery.org_id == org.id) == 2
    told = await _count(sessions, Message, Message.conversation_id == mine)
    assert told == 1  # "a"'s message in its conversation, once
    assert await _count(sessions, Message, Message.conversation_id == theirs) == 0


_REFUSE = """CREATE FUNCTION refuse_message() RETURNS trigger AS $$
BEGIN RAISE EXCEPTION 'refused'; END $$ LANGUAGE plpgsql"""
_TRIGGER = """CREATE TRIGGER refuse_messages BEFORE INSERT ON messages
FOR EACH ROW EXECUTE FUNCTION refuse_message()"""


async def test_on_sqlite_a_batch_is_recorded_in_one_transaction(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'platform.db'}"
    engine = make_engine(url)
    try:
        await migrate(engine)
        made = make_sessionmaker(engine)
        org, other = await _orgs(made, 2)
        (mine, _) = await _hooked(made, org, other)
        notifier = TaskNotifier(made, make_settings(url, notify_interval_seconds=3600), None)
        for i in range(5):
            notifier.observe(_in_conversation(org, f"s{i}", mine))
        async with _worker(notifier):
            await _until(lambda: _at_least(made, org, 5))
        async with made() as session:
            logged = await session.scalar(select(func.count()).select_from(NotifyEvent))
        assert logged == 5
        assert await _count(made, WebhookDelivery) == 5
        assert await _count(made, Message, Message.conversation_id == mine) == 5
    finally:
        await engine.dispose()
