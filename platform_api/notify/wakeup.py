"""Wakes this replica's live streams and webhook deliverer when an event commits, so they
need not wait for their next look at the database; `QUEUED` counts the commits that queued
a webhook delivery, so a wake-up that queued none claims nothing."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncSession


def utcnow() -> datetime:
    return datetime.now(UTC)


class Wakeup:
    """A generation counter that waiters can wait on."""

    def __init__(self) -> None:
        self.generation = 0
        self._waiters: set[asyncio.Event] = set()

    def notify(self) -> None:
        self.generation += 1
        for waiter in list(self._waiters):
            waiter.set()

    def after_commit(self, session: AsyncSession) -> None:
        """`notify` once the session's transaction commits (never for a rollback)."""

        def committed(_: Any) -> None:
            self.notify()

        event.listen(session.sync_session, "after_commit", committed, once=True)

    async def wait(self, seen: int, timeout: float) -> int:  # noqa: ASYNC109
        """Wait until the generation moves past `seen` or `timeout` passes; the generation."""
        if self.generation != seen:
            return self.generation
        waiter = asyncio.Event()
        self._waiters.add(waiter)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(waiter.wait(), timeout)
        finally:
            self._waiters.discard(waiter)
        return self.generation


WAKEUP = Wakeup()
"""This process's wake-up signal (a plain object: creating it does nothing else)."""

QUEUED = Wakeup()
"""Moves when a transaction of this replica that queued a webhook delivery commits (the
deliverer claims at once then; deliveries queued elsewhere, and retries, at its next look)."""
