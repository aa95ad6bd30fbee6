"""The live event stream of one connection: the events of the caller's orgs from the
event log, after the cursor (`Last-Event-ID`, the log's seq), as server-sent events.

Woken at once by an event committed on this replica (`wakeup.WAKEUP`), and looking at
the log every `notify_interval_seconds` for the others'. Heartbeat comments keep idle
connections through proxies. A database session is opened per look, never held.

Each look first asks `access` (in the same session) which orgs the caller may still read:
a removed membership leaves the stream at once, and a deactivated user (or one left with
no such org) has its stream ended. A removal or deactivation wakes this replica's
streams at its commit; the others' see it at their next look.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from platform_api.bounds import event_cursor
from platform_api.models import NotifyEvent
from platform_api.notify.delivery import envelope
from platform_api.notify.repository import EventRepository
from platform_api.notify.wakeup import WAKEUP
from platform_api.settings import Settings

Access = Callable[[AsyncSession], Awaitable[frozenset[uuid.UUID]]]
"""The orgs the caller may read now (none: the stream ends)."""

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
        access: Access | None = None,
    ) -> None:
        self._sessions = sessions
        self._orgs = frozenset(org_ids)
        self._access = access
        self._interval = settings.notify_interval_seconds
        self._heartbeat = settings.events_heartbeat_seconds

    async def start(self, last_event_id: str | None) -> int:
        """The cursor: `Last-Event-ID` when it is a seq, else the newest event now."""
        cursor = event_cursor(last_event_id)
        if cursor is not None:
            return cursor
        async with self._sessions() as session:
            return await EventRepository(session).last_seq()

    async def _next(self, cursor: int) -> list[NotifyEvent] | None:
        """The next events; None once the caller may read none of its orgs any more."""
        async with self._sessions() as session:
            if self._access is not None:
                self._orgs &= await self._access(session)
                if not self._orgs:
                    return None
            return list(await EventRepository(session).since(self._orgs, cursor, BATCH))

    async def look(self, cursor: int) -> tuple[list[bytes], int] | None:
        """The frames of the events after `cursor` and the new cursor; None once the
        caller may read none of its orgs any more."""
        rows = await self._next(cursor)
        if rows is None:
            return None
        return [frame(row) for row in rows], rows[-1].seq if rows else cursor

    async def run(
        self, cursor: int, disconnected: Callable[[], Awaitable[bool]]
    ) -> AsyncIterator[bytes]:
        """The stream's bytes, from `cursor`, until the client goes away or may read
        nothing any more."""
        async for chunk in serve(self, cursor, disconnected, self._interval, self._heartbeat):
            yield chunk


class Source(Protocol):
    """What a live stream reads: the frames after a cursor (None: the stream ends)."""

    async def look(self, cursor: int) -> tuple[list[bytes], int] | None: ...


async def serve(
    source: Source,
    cursor: int,
    disconnected: Callable[[], Awaitable[bool]],
    interval: float,
    heartbeat: float,
) -> AsyncIterator[bytes]:
    """A live stream's bytes: `source`'s frames from `cursor`, looked for at once when
    this replica commits an event (`WAKEUP`) and every `interval` seconds otherwise, a
    heartbeat comment when idle for `heartbeat` seconds, until the client goes away or
    `source` answers None. Shared by the event stream and a conversation's stream."""
    yield f"retry: {RETRY_MS}\n: connected\n\n".encode()
    beat = time.monotonic()
    generation = WAKEUP.generation
    while not await disconnected():
        found = await source.look(cursor)
        if found is None:
            yield b": access ended\n\n"
            return
        frames, cursor = found
        for chunk in frames:
            yield chunk
        if frames:
            beat = time.monotonic()
            continue
        if time.monotonic() - beat >= heartbeat:
            beat = time.monotonic()
            yield b": heartbeat\n\n"
        generation = await WAKEUP.wait(generation, min(interval, heartbeat))
