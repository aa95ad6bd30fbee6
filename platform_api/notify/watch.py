"""From the platform's task watch to events: `TaskNotifier` subscribes to the
`DecisionIndex` (every task it lists or sees change), derives the events the task's state
implies (`events.task_events`), and records each through `emitter.emit` (the event
log keeps each id once, so a relist, a restart or a second replica notifies nothing
twice). When a task ends (completed, rejected, expired, failed), the request ends with
it (`request_ended`, and a platform message in its conversation, once), unless it was
rejected with feedback and the `Reviser` asked its agent for a revised plan (then the
request goes on with the revision).

`run` also looks, every `notify_interval_seconds`, for decisions due within
`queue_near_deadline_seconds` (near deadline) and hands due webhook deliveries to the
`Deliverer`; woken by every event committed here, it claims deliveries only when that
commit queued one (`wakeup.QUEUED`) or a look is due (every `notify_interval_seconds`, as
before: retries and other replicas' deliveries); once every `PRUNE_EVERY` at
most, it prunes the event log past `notify_retention_seconds` (a retention of a day or more
needs no sweep per wake-up: that was a transaction and a DELETE per approval).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from humanwork_core.resources import AgenticTask
from platform_api.db import autocommit_driver, autocommitting
from platform_api.notify import batch_sql, events, progress
from platform_api.notify.deadlines import Deadlines
from platform_api.notify.delivery import Deliverer
from platform_api.notify.emitter import emit, emit_many
from platform_api.notify.repository import EventRepository
from platform_api.notify.wakeup import QUEUED, WAKEUP, utcnow
from platform_api.settings import Settings

log = logging.getLogger(__name__)

Key = tuple[str, str]
SEEN_LIMIT = 100_000
"""Tasks whose recorded events are remembered at most (the oldest forgotten first); the
event log ignores an event logged already, so forgetting costs a no-op insert, never a
second event."""
PRUNE_EVERY = timedelta(minutes=1)
"""How often the event log is pruned at most (the retention is at least a minute)."""
BATCHES_PER_TRANSACTION = 200
"""Tasks' events recorded in one transaction at most (what queued while one was written)."""

ENDING_TEXT = {
    events.COMPLETED: "The request “{summary}” is complete.",
    events.REJECTED: "The request “{summary}” was rejected by an expert.",
    events.EXPIRED: "The request “{summary}” expired: no expert decided in time.",
    events.FAILED: "The request “{summary}” failed.",
    events.CANCELLED: "The request “{summary}” was cancelled.",
}
LIMIT_TEXT = (
    "The request “{summary}” was rejected by an expert; it was revised as often as allowed."
)
REVISION_REQUESTED = "requested"

TaskLookup = Callable[[str, str], AgenticTask | None]
"""The last version the watch saw of an open task, by namespace and name (the
`DecisionIndex`'s `task`)."""

Reviser = Callable[[AgenticTask], Awaitable[str]]
"""Asks for a revised plan of a rejected task; answers `requested`, or why not (the
revision loop, `platform_api.revisions`, given by the composition root)."""


class TaskNotifier:
    """Events of the tasks the watch sees (see the module docstring)."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        settings: Settings,
        deliverer: Deliverer | None,
        reviser: Reviser | None = None,
        tasks: TaskLookup | None = None,
    ) -> None:
        self._reviser = reviser
        self._endings: set[asyncio.Task[None]] = set()
        self._sessions = sessions
        self._settings = settings
        self._deliverer = deliverer
        self._queue: asyncio.Queue[Key] = asyncio.Queue()
        self._waiting: dict[Key, _Batch] = {}
        """The events waiting to be recorded, one batch per task (its key queued once): a
        task seen again before they were recorded adds its new events to its batch, so a
        notifier behind the watch holds each task's events once, not once per change."""
        self._seen: dict[Key, set[str]] = {}
        """The recorded events of each task not yet ended, by id: a task that ended (or was
        deleted) is forgotten, so what is kept follows the open tasks, not the history."""
        # the deadlines of the open decisions, and where to read their tasks when due
        # (the `DecisionIndex`): no parsed task is held per open decision
        self._open = Deadlines()
        self._tasks = tasks
        self._namespaces: dict[uuid.UUID, str | None] = {}
        self._pruned_at: datetime | None = None
        self._claimed: tuple[int, datetime] | None = None
        """`QUEUED`'s generation and the time of the last claim of deliveries."""

    # --- fed by the watch (synchronous, cheap) --------------------------------------------

    def observe(self, task: AgenticTask) -> None:
        key = (task.metadata.namespace or "", task.metadata.name)
        deadline = events.deadline_of(task)
        if deadline is not None and not _ended(task):
            self._open.put(key, deadline)
        else:
            self._open.drop(key)
        found = events.task_events(task)
        # a deadline already near when the watch sees it is told at once, not at the next
        # tick (by which time the step may be decided)
        near = timedelta(seconds=self._settings.queue_near_deadline_seconds)
        soon = events.near_deadline(task, datetime.now(UTC), near)
        self._enqueue([*found, soon] if soon is not None else found, task)

    def forget(self, key: Key) -> None:
        self._open.drop(key)
        self._seen.pop(key, None)

    @property
    def remembered(self) -> int:
        """How many recorded events are remembered (of tasks not yet ended)."""
        return sum(len(ids) for ids in self._seen.values())

    @property
    def backlog(self) -> int:
        """How many tasks have events waiting to be recorded."""
        return len(self._waiting)

    def _enqueue(self, found: Iterable[events.Event], task: AgenticTask) -> None:
        key = (task.metadata.namespace or "", task.metadata.name)
        seen = self._seen.get(key, ())
        fresh = [e for e in found if e.event_id not in seen]
        if fresh:
            # the task itself only when it may end the request (`_conclude`
            # needs it); on a start every open decision's event is queued at once
            ending = any(e.event in ENDING_TEXT for e in fresh)
            org, namespace = task.spec.org_id, task.metadata.namespace
            self._put(_Batch(key, org, namespace, fresh, task if ending else None))

    def _put(self, batch: _Batch, retried: bool = False) -> None:
        """Queue `batch`, or add it to its task's waiting batch (a retried batch's events
        go first: they were seen first)."""
        waiting = self._waiting.get(batch.key)
        if waiting is None:
            self._waiting[batch.key] = batch
            self._queue.put_nowait(batch.key)
        else:
            self._waiting[batch.key] = batch.then(waiting) if retried else waiting.then(batch)

    async def _take(self) -> list[_Batch]:
        """The next task's waiting events, and what else waits (at most a transaction's)."""
        batches: list[_Batch] = []
        while not batches or (len(batches) < BATCHES_PER_TRANSACTION and not self._queue.empty()):
            key = self._queue.get_nowait() if batches else await self._queue.get()
            batch = self._waiting.pop(key, None)
            if batch is not None:
                batches.append(batch)
        return batches

    # --- the workers ----------------------------------------------------------------------

    async def run(self) -> None:
        """Record events as they come, and tick (until cancelled)."""
        ticker = asyncio.create_task(self._tick_forever())
        try:
            while True:
                # what queued up meanwhile goes in the same transaction
                await self._record_or_retry(await self._take())
        finally:
            for running in (ticker, *self._endings):
                running.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await running

    async def _namespace(self, session: AsyncSession, org_id: uuid.UUID) -> str | None:
        if org_id not in self._namespaces:
            self._namespaces[org_id] = await EventRepository(session).org_namespace(org_id)
        return self._namespaces[org_id]

    async def _record_or_retry(self, batches: list[_Batch]) -> None:
        try:
            await self._record(batches)
        except Exception as exc:
            if len(batches) > 1:  # one failing task's events must not hold back the others'
                for batch in batches:
                    await self._record_or_retry([batch])
                return
            log.warning("notifications: %s; retrying", exc)  # the database failed
            await asyncio.sleep(self._settings.notify_interval_seconds)
            self._put(batches[0], retried=True)

    async def _record(self, batches: list[_Batch]) -> None:
        """Record the events of `batches` together: on PostgreSQL in one statement that
        commits on its own (`batch_sql`: the event log's insert, the deliveries and the
        conversation messages, no BEGIN, COMMIT or webhook read of their own), elsewhere
        in one transaction; then remember them and conclude the requests they ended."""
        async with self._sessions() as session:
            await autocommitting(session)
            if autocommit_driver(session) is None:
                async with session.begin():
                    recorded, told = await self._gathered(session, batches)
                    new = await _logged_in(session, told)
            else:
                recorded, told = await self._gathered(session, batches)
                done = await batch_sql.record(autocommit_driver(session), told, utcnow())
                new = _first_new(told, done.new)
        flags = iter(new)
        endings: list[tuple[AgenticTask, uuid.UUID, events.Event]] = []
        for batch, org_id in recorded:  # in the order `told` was made
            ended = [e for e in batch.events if next(flags) and e.event in ENDING_TEXT]
            if ended and batch.task is not None:
                endings.append((batch.task, org_id, ended[-1]))
        for batch, _ in recorded:
            self._remember(batch)
        for task, org_id, last in endings:
            ending = asyncio.create_task(self._conclude(task, org_id, last))
            self._endings.add(ending)
            ending.add_done_callback(self._endings.discard)

    async def _gathered(
        self, session: AsyncSession, batches: list[_Batch]
    ) -> tuple[list[tuple[_Batch, uuid.UUID]], list[batch_sql.Told]]:
        """The batches of a known org's namespace with their org, and their events with
        their payloads as logged, in order."""
        recorded: list[tuple[_Batch, uuid.UUID]] = []
        told: list[batch_sql.Told] = []
        for batch in batches:
            org_id = await self._org_of(session, batch)
            if org_id is None:
                continue
            recorded.append((batch, org_id))
            for event in batch.events:
                told.append((org_id, event, await _payload(session, org_id, event)))
        return recorded, told

    async def _org_of(self, session: AsyncSession, batch: _Batch) -> uuid.UUID | None:
        """The batch's org, when its namespace is that org's (None: not recorded)."""
        try:
            org_id = uuid.UUID(batch.org_id)
        except ValueError:
            return None
        if await self._namespace(session, org_id) != batch.namespace:
            self._namespaces.pop(org_id, None)  # an org made since: look again later
            return None
        return org_id

    async def _conclude(self, task: AgenticTask, org_id: uuid.UUID, ended: events.Event) -> None:
        """A task ended: a rejection with feedback asks for a revision (the request goes
        on); otherwise the request ended, and its conversation is told, once."""
        outcome = ""
        if ended.event == events.REJECTED and self._reviser is not None:
            try:
                outcome = await self._reviser(task)
            except Exception as exc:  # the agent could not be asked: the request ends
                log.warning("no revision of %s: %s", task.metadata.name, exc)
            if outcome == REVISION_REQUESTED:
                return
        text = (LIMIT_TEXT if outcome == "limit" else ENDING_TEXT[ended.event]).format(
            summary=task.spec.description
        )
        uid = task.metadata.uid or task.metadata.name
        payload = {
            **ended.payload,
            "event_id": f"{uid}:{events.REQUEST_ENDED}",
            "ending": ended.event,
            "revision": outcome or None,
        }
        async with self._sessions() as session, session.begin():
            if await emit(session, org_id, events.REQUEST_ENDED, payload):
                await _tell(session, task, org_id, text, ended.event)

    def _remember(self, batch: _Batch) -> None:
        """Remember a recorded batch's events; forget its task once it ended (seen again,
        its events are no-op inserts)."""
        if any(e.event in ENDING_TEXT for e in batch.events):
            self._seen.pop(batch.key, None)
            return
        self._seen.setdefault(batch.key, set()).update(e.event_id for e in batch.events)
        if len(self._seen) > SEEN_LIMIT:
            for old in list(self._seen)[: SEEN_LIMIT // 10]:
                del self._seen[old]

    # --- the periodic look ----------------------------------------------------------------

    async def _tick_forever(self) -> None:
        while True:
            try:
                await self.tick()
            except Exception as exc:
                log.warning("notifications: the periodic look failed: %s", exc)
            await WAKEUP.wait(WAKEUP.generation, self._settings.notify_interval_seconds)

    async def tick(self) -> None:
        """Near deadlines, due deliveries, and the event log's pruning (once a
        `PRUNE_EVERY` at most)."""
        now = utcnow()
        near = timedelta(seconds=self._settings.queue_near_deadline_seconds)
        for key in self._open.between(now, now + near):
            task = self._tasks(*key) if self._tasks is not None else None
            if task is None:
                continue
            event = events.near_deadline(task, now, near)
            if event is not None:
                self._enqueue([event], task)
        if self._deliverer is not None and self._deliveries_due(now):
            queued = QUEUED.generation
            while await self._deliverer.run_once():
                pass
            self._claimed = (queued, now)
        if self._pruned_at is not None and now - self._pruned_at < PRUNE_EVERY:
            return
        async with self._sessions() as session, session.begin():
            retention = timedelta(seconds=self._settings.notify_retention_seconds)
            await EventRepository(session).prune(now - retention)
        self._pruned_at = now

    def _deliveries_due(self, now: datetime) -> bool:
        """Whether to claim deliveries: a commit here queued one since the last claim, or
        `notify_interval_seconds` passed since it (or there was none)."""
        if self._claimed is None:
            return True
        queued, at = self._claimed
        interval = timedelta(seconds=self._settings.notify_interval_seconds)
        return QUEUED.generation != queued or now - at >= interval


@dataclass(frozen=True, slots=True)
class _Batch:
    """Events of one task to record: its key, org and namespace, and the task itself only
    when an event may end the request."""

    key: Key
    org_id: str
    namespace: str | None
    events: list[events.Event]
    task: AgenticTask | None

    def then(self, later: _Batch) -> _Batch:
        """These events, then those of `later` not among them (each event id once, as
        first seen); the later task when it has one."""
        ids = {e.event_id for e in self.events}
        added = [e for e in later.events if e.event_id not in ids]
        task = later.task or self.task
        return _Batch(self.key, later.org_id, later.namespace, self.events + added, task)


async def _payload(session: AsyncSession, org_id: uuid.UUID, event: events.Event) -> dict[str, Any]:
    """The event's payload as logged: with its id, and its signed receipt when it has one."""
    payload = {**event.payload, "event_id": event.event_id}
    if event.receipt_key is not None:
        payload["receipt"] = await EventRepository(session).receipt(org_id, *event.receipt_key)
    return payload


async def _logged_in(session: AsyncSession, told: list[batch_sql.Told]) -> list[bool]:
    """Log `told` in the session's transaction (one insert), each new event's message in
    its conversation once; whether each was new."""
    new = await emit_many(session, [(org, e.event, d) for org, e, d in told])
    for (org_id, event, _), fresh in zip(told, new, strict=True):
        if fresh:
            await progress.tell(session, org_id, event)  # the conversation, once
    return new


def _first_new(told: list[batch_sql.Told], logged: set[tuple[uuid.UUID, str]]) -> list[bool]:
    """Whether each event of `told` was new (an event id twice: new once, the first time)."""
    fresh = set(logged)
    out = []
    for org_id, _, payload in told:
        key = (org_id, str(payload.get("event_id")))
        out.append(key in fresh)
        fresh.discard(key)
    return out


def _ended(task: AgenticTask) -> bool:
    phase = task.current_status().phase
    return phase is not None and phase.terminal


async def _tell(
    session: AsyncSession, task: AgenticTask, org_id: uuid.UUID, text: str, ending: str
) -> None:
    """A platform message in the task's conversation saying how the request ended."""
    if not task.spec.conversation_id:
        return
    meta = {"event": "request_ended", "task": task.metadata.name, "ending": ending}
    await EventRepository(session).tell_conversation(
        uuid.UUID(task.spec.conversation_id), org_id, text, meta
    )
