"""The live event stream of one connection: the events of the caller's orgs from the
event log, after the cursor (`Last-Event-ID`, the log's seq), as server-sent events.

Woken at once by an event committed on this replica (`wakeup.WAKEUP`), and looking at
the log every `notify_interval_seconds` for the others'. Heartbeat comments keep idle
connections through proxies. A database session is opened per look, never held.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Collection

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from platform_api.models import NotifyEvent
from platform_api.notify.delivery import envelope
from platform_api.notify.repository import EventRepository
from platform_api.notify.wakeup import WAKEUP
from platform_api.settings import Settings

BATCH = 200
RETRY_MS = 3000


def frame(row: NotifyEvent) -> bytes:
    """One event as a server-sent event."""
    data = envelope(row.org_id, row.event_id, row.event, row.payload, row.created_at)
    return f"id: {row.seq}\nevent: {row.event}\ndata: {data}\n\n".encode()


class EventStream:
    """One client's stream (see the module docstring)."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        settings: Settings,
        org_ids: Collection[uuid.UUID],
    ) -> None:
        self._sessions = sessions
        self._orgs = frozenset(org_ids)
        self._interval = settings.notify_interval_seconds
        self._heartbeat = settings.events_heartbeat_seconds

    async def start(self, last_event_id: str | None) -> int:
        """The cursor: `Last-Event-ID` when it is a seq, else the newest event now."""
        if last_event_id is not None and last_event_id.strip().isdigit():
            return int(last_event_id.strip())
        async with self._sessions() as session:
            return await EventRepository(session).last_seq()

    async def _next(self, cursor: int) -> list[NotifyEvent]:
        async with self._sessions() as session:
            return list(await EventRepository(session).since(self._orgs, cursor, BATCH))

    async def run(
        self, cursor: int, disconnected: Callable[[], Awaitable[bool]]
    ) -> AsyncIterator[bytes]:
        """The stream's bytes, from `cursor`, until the client goes away."""
        yield f"retry: {RETRY_MS}\n: connected\n\n".encode()
        beat = time.monotonic()
        generation = WAKEUP.generation
        while not await disconnected():
            rows = await self._next(cursor)
            for row in rows:
                cursor = row.seq
                yield frame(row)
            if rows:
                beat = time.monotonic()
                continue
            if time.monotonic() - beat >= self._heartbeat:
                beat = time.monotonic()
                yield b": heartbeat\n\n"
            generation = await WAKEUP.wait(generation, min(self._interval, self._heartbeat))
