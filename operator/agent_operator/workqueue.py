"""The operator's own queue of AgentInstances to reconcile, worked by a fixed number of tasks.

kopf runs each object's handler in a worker slot of its own, at most `worker_limit` at
once. A full reconcile (a dozen API calls) run inside the handler held its slot for as
long as it waited on the API server, so a burst of new orgs filled every slot and their
children's events (a Deployment turning Ready: the org's last step) waited behind the
whole burst: each org became Ready near the burst's end rather than when its own work
was done. The handlers now only put the instance here and return; `workers` tasks take
the keys in the order they came, so a burst is worked through org by org, each finished
before the later ones start, and the slots stay free for the children's events.

A key is queued at most once: adding a queued key replaces what it carries (the latest
event's body), adding one being worked queues it once more for after. Pure asyncio, no
I/O of its own. :func:`run_due` runs what the scheduler has due by a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Generic, TypeVar

Key = tuple[str, str]
"""(namespace, name)."""
T = TypeVar("T")
LOG = logging.getLogger("humanwork.operator")


class WorkQueue(Generic[T]):
    """Keys to work on, each with the latest item added for it, worked by `workers` tasks
    in the order they were first added (a key is never worked by two tasks at once)."""

    def __init__(self, run: Callable[[Key, T], Awaitable[None]], workers: int) -> None:
        self._run = run
        self._workers = workers
        self._order: deque[Key] = deque()
        self._items: dict[Key, T] = {}
        self._running: set[Key] = set()
        self._again: dict[Key, T] = {}
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def __len__(self) -> int:
        """Keys waiting (not counting those being worked)."""
        return len(self._items) + len(self._again)

    def add(self, key: Key, item: T) -> None:
        """Queue `key` with `item` (replacing what a queued key carried)."""
        if key in self._running:
            self._again[key] = item
            return
        if key not in self._items:
            self._order.append(key)
        self._items[key] = item
        self._wake.set()

    def discard(self, key: Key) -> None:
        """Forget `key`'s pending work (its object is gone); a run under way finishes."""
        self._items.pop(key, None)
        self._again.pop(key, None)

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._work(), name=f"humanwork-reconciler-{i}")
            for i in range(self._workers)
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    def _next(self) -> tuple[Key, T] | None:
        while self._order:
            key = self._order.popleft()
            if key in self._items:  # not discarded meanwhile
                return key, self._items.pop(key)
        return None

    async def _work(self) -> None:
        while True:
            taken = self._next()
            if taken is None:
                self._wake.clear()
                await self._wake.wait()
                continue
            key, item = taken
            self._running.add(key)
            try:
                await self._run(key, item)
            except Exception:  # `run` handles its own failures; this only keeps the worker
                LOG.exception("work on %s/%s failed", *key)
            finally:
                self._running.discard(key)
                again = self._again.pop(key, None)
                if again is not None:
                    self.add(key, again)


async def run_due(
    due: dict[tuple[str, str], datetime],
    now: datetime,
    run: Callable[[tuple[str, str]], Awaitable[None]],
    what: str,
) -> None:
    """Run `run` for each key of `due` whose time has come (and was not moved meanwhile);
    one that fails is tried again in 5 seconds."""
    for key, at in list(due.items()):
        if at > now or due.get(key) != at:
            continue
        del due[key]
        try:
            await run(key)
        except Exception as exc:  # one object's trouble must not stop the others
            LOG.warning("%s %s/%s failed: %s", what, key[0], key[1], exc)
            due.setdefault(key, now + timedelta(seconds=5))
