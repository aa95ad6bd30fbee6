"""`DecisionIndex`: the AgenticTasks that wait for a human decision, kept in memory.

Fed by one list-then-watch of AgenticTasks across the cluster (`run`), so the queue is
answered without calling the API server. A task is kept while it is not in a terminal
phase and has a decidable step, or a step whose outcome is unknown (waiting for an
expert's resolution); and a failed task while a step an expert may retry waits for them
(status `failed`, no deadline). When the watch's resourceVersion is
too old (410) the index lists again; on other errors it waits a moment and lists again.

The queue's read path is made cheap by doing the work when a task changes rather than on
every read: each open decision becomes a `Row` holding its sort key and its queue item
already serialised to JSON (all but the two time-dependent fields, near_deadline and
age_seconds, appended per read); rows are kept sorted (deadline first) per org, so a page
is a merge of the caller's orgs' lists, cut before anything is serialised. Whether a
decision expired depends on the time, so it is decided when read; expired rows sit at the
front of their list (their deadline passed), so counting skips over a short prefix.

The watch parses each changed task once, from its line (`kube.task_watch`); the last
`RECENT` tasks so parsed are kept beside their rows, so a decision that reads its task
soon after it changed takes that one rather than parsing the row's JSON again.

Other parts of the platform (auto-approval, archiving) subscribe to every task the watch
sees with `subscribe`.
"""

from __future__ import annotations

import asyncio
import bisect
import gc
import heapq
import itertools
import logging
import uuid
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Annotated

from fastapi import Depends
from pydantic import ValidationError

from humanwork_core import taskflow
from humanwork_core.policy import effective_risk
from humanwork_core.requester import requester_of
from humanwork_core.resources import AgenticTask, ExecutionState, Step, StepState, TaskPhase
from platform_api.human_tasks.schemas import HumanTask
from platform_api.kube.client import KubeClient, KubeError
from platform_api.kube.task_watch import TaskEvent
from platform_api.slots import Slot
from platform_api.tasks.orgs import OrgDirectory

log = logging.getLogger(__name__)

RETRY_SECONDS = 2.0
RECENT = 512
"""Parsed tasks kept of those the watch saw change last (their rows' `task` read without
parsing the row's JSON again: a decision usually follows soon after its task changed);
a bounded number, so that the collector's walk stays small however many are open."""
_FAR = datetime.max.replace(tzinfo=UTC)
_EARLY = datetime.min.replace(tzinfo=UTC)
_TIME_FIELDS = b',"near_deadline":false,"age_seconds":0}'

Listener = Callable[[AgenticTask], None]
Key = tuple[str, str]


@dataclass(slots=True)
class Row:
    """One open decision: a task's decidable step, with its queue item pre-serialised."""

    key: Key
    org_id: str
    sort: tuple[bool, datetime, datetime, str, str]
    deadline: datetime | None
    created: datetime | None
    expires_at_deadline: bool
    expired_state: bool
    head: bytes = field(repr=False)
    raw: bytes = field(repr=False)
    """The task as JSON: rows hold no object graph, so that the cyclic garbage collector
    has almost nothing to walk however many decisions are open (10,000 parsed tasks made
    a full collection take about 300 ms)."""

    @property
    def task(self) -> AgenticTask:
        return AgenticTask.model_validate_json(self.raw)

    def expired(self, now: datetime) -> bool:
        """Whether the decision ran out of time (`taskflow.is_expired` of its step)."""
        return self.expired_state or (
            self.expires_at_deadline and self.deadline is not None and now >= self.deadline
        )

    def item(self, now: datetime, near: timedelta) -> bytes:
        """The queue item's JSON at `now`."""
        near_deadline = self.deadline is not None and self.deadline - now <= near
        age = max(0, int((now - (self.created or now)).total_seconds()))
        return b'%s,"near_deadline":%s,"age_seconds":%d}' % (
            self.head,
            b"true" if near_deadline else b"false",
            age,
        )


def _row(key: Key, task: AgenticTask, step: Step) -> Row:
    entry = task.current_status().step(step.id)
    meta = task.metadata
    task_id = f"{meta.namespace}/{meta.name}"
    failed = entry.execution is not None and entry.execution.state is ExecutionState.FAILED
    deadline = None if failed else entry.deadline  # a failed step waits for no deadline
    client = entry.decision is not None and taskflow.awaits_client(step, entry)
    item = HumanTask(
        id=f"{task_id}/{step.id}",
        task_id=task_id,
        run_id=meta.uid or "",
        org_id=uuid.UUID(task.spec.org_id),
        workflow=task.spec.agent_ref.name,
        summary=task.spec.description,
        requested_by=requester_of(task),
        step_id=step.id,
        step_description=step.description,
        kind=step.kind.value,
        tool=step.tool,
        risk=effective_risk(step).value,
        status="outcome_unknown"
        if taskflow.is_outcome_unknown(entry)
        else "failed"
        if failed
        else "waiting_for_client"
        if client
        else "escalated"
        if entry.escalations > 0
        else "pending",
        deadline=deadline,
        escalations=entry.escalations,
        near_deadline=False,
        age_seconds=0,
    )
    item_json = item.model_dump_json().encode()
    assert item_json.endswith(_TIME_FIELDS), "near_deadline and age_seconds must come last"
    return Row(
        key=key,
        org_id=task.spec.org_id,
        sort=(
            deadline is None,
            deadline or _FAR,
            meta.creation_timestamp or _EARLY,
            meta.namespace or "",
            meta.name,
        ),
        deadline=deadline,
        created=meta.creation_timestamp,
        expires_at_deadline=not failed
        and entry.escalations >= task.spec.policy.escalation.max_escalations,
        expired_state=(entry.decision is None or client) and entry.state is StepState.EXPIRED,
        head=item_json[: -len(_TIME_FIELDS)],
        raw=_compact(task),
    )


def _compact(task: AgenticTask) -> bytes:
    """The task as compact JSON, as it was given (the fields it was read with), without
    `metadata.managedFields` (about half of a task's bytes, which nothing in the platform
    reads; memory per open decision)."""
    return task.model_dump_json(
        by_alias=True, exclude_unset=True, exclude={"metadata": {"managedFields"}}
    ).encode()


def _seen(raw: dict[str, object]) -> tuple[Key, AgenticTask, Row | None] | None:
    """A task as a list saw it: its key, the task, and its row when it waits for a
    decision (None when it does not); None when it is no valid task."""
    try:
        task = AgenticTask.from_wire(raw)
    except ValidationError:
        return None
    key, row = _seen_task(task)
    return key, task, row


def _seen_task(task: AgenticTask) -> tuple[Key, Row | None]:
    """A valid task's key, and its row when it waits for a decision (None otherwise)."""
    key = (task.metadata.namespace or "", task.metadata.name)
    phase = task.current_status().phase
    step = (
        taskflow.decidable_step(task)
        or taskflow.client_wait_step(task)  # shown as `waiting_for_client`
        or taskflow.awaiting_resolution(task)
    )
    if phase is TaskPhase.FAILED:  # a failed step an expert may retry
        step = taskflow.awaiting_retry(task)
        phase = None if step is not None else phase
    if (phase is not None and phase.terminal) or step is None:
        return key, None
    return key, _row(key, task, step)


def _sort_key(row: Row) -> tuple[bool, datetime, datetime, str, str]:
    return row.sort


class DecisionIndex:
    """The open decisions of the cluster: one row per task, sorted per org."""

    def __init__(self) -> None:
        self._rows: dict[Key, Row] = {}
        self._by_org: dict[str, list[Row]] = {}
        self._listeners: list[Listener] = []
        self._recent: dict[Key, tuple[Row, AgenticTask]] = {}
        """The last `RECENT` tasks the watch parsed, with the row each made."""
        self._forgetters: list[Callable[[Key], None]] = []
        self.orgs = OrgDirectory()
        """namespace <-> org cache shared by the task endpoints and the automation."""
        self.ready = asyncio.Event()

    def __len__(self) -> int:
        return len(self._rows)

    def subscribe(self, listener: Listener, forget: Callable[[Key], None] | None = None) -> None:
        """Call `listener` with every task the watch sees (listed, added, modified), and
        `forget` with the key of every task deleted."""
        self._listeners.append(listener)
        if forget is not None:
            self._forgetters.append(forget)

    # --- keeping the rows -----------------------------------------------------------------

    def _drop(self, key: Key) -> None:
        self._recent.pop(key, None)
        row = self._rows.pop(key, None)
        if row is None:
            return
        rows = self._by_org.get(row.org_id, [])
        at = bisect.bisect_left(rows, row.sort, key=_sort_key)
        while at < len(rows) and rows[at].sort == row.sort:
            if rows[at] is row:
                del rows[at]
                break
            at += 1
        if not rows:
            self._by_org.pop(row.org_id, None)

    def _put(self, row: Row) -> None:
        self._drop(row.key)
        self._rows[row.key] = row
        bisect.insort(self._by_org.setdefault(row.org_id, []), row, key=_sort_key)

    def observe(self, raw: dict[str, object]) -> None:
        """Take in the current state of a task (added or modified), as a dict."""
        seen = _seen(raw)
        if seen is not None:
            self.observe_task(seen[1])

    def observe_task(self, task: AgenticTask) -> None:
        """Take in the current state of a task (added or modified), validated already."""
        key, row = _seen_task(task)
        if row is None:
            self._drop(key)
        else:
            self._put(row)
            self._recent[key] = (row, task)
            if len(self._recent) > RECENT:  # the oldest first (dicts keep their order)
                del self._recent[next(iter(self._recent))]
        self._tell(task)

    def _tell(self, task: AgenticTask) -> None:
        for listener in self._listeners:
            try:
                listener(task)
            except Exception:  # a listener's bug must not stop the queue
                log.exception("a task listener failed")

    def forget(self, raw: dict[str, object]) -> None:
        meta = raw.get("metadata")
        if isinstance(meta, dict):
            self.forget_key((str(meta.get("namespace", "")), str(meta.get("name", ""))))

    def forget_key(self, key: Key) -> None:
        """A task was deleted: its row dropped, the subscribers told."""
        self._drop(key)
        for forget in self._forgetters:
            forget(key)

    def replace(self, items: list[dict[str, object]]) -> None:
        """Hold exactly `items` (a fresh list of every task)."""
        rows: dict[Key, Row] = {}
        self._take(rows, items)
        self._swap(rows)

    def _take(self, rows: dict[Key, Row], items: list[dict[str, object]]) -> None:
        """Add a page of a fresh list to `rows` (not yet what readers see)."""
        for raw in items:
            seen = _seen(raw)
            if seen is None:
                continue
            key, task, row = seen
            if row is None:
                rows.pop(key, None)
            else:
                rows[key] = row
            self._tell(task)

    def _swap(self, rows: dict[Key, Row]) -> None:
        """Readers see `rows` from now on (sorted once per org, rather than row by row)."""
        by_org: dict[str, list[Row]] = {}
        for row in rows.values():
            by_org.setdefault(row.org_id, []).append(row)
        for org_rows in by_org.values():
            org_rows.sort(key=_sort_key)
        self._rows, self._by_org = rows, by_org
        self._recent.clear()

    # --- reading --------------------------------------------------------------------------

    def task(self, namespace: str, name: str) -> AgenticTask | None:
        """The last version the watch saw of an open task (None for any other)."""
        row = self._rows.get((namespace, name))
        if row is None:
            return None
        recent = self._recent.get(row.key)
        return recent[1] if recent is not None and recent[0] is row else row.task

    def count(self, org_ids: Collection[uuid.UUID | str], now: datetime) -> int:
        """How many decisions of `org_ids` are open at `now`."""
        total = 0
        for org in {str(o) for o in org_ids}:
            rows = self._by_org.get(org)
            if not rows:
                continue
            expired = 0
            for row in rows:  # the expired ones have a past deadline: a prefix of the list
                if row.deadline is None or row.deadline > now:
                    break
                expired += row.expired(now)
            total += len(rows) - expired
        return total

    def summary(self, now: datetime) -> tuple[int, datetime | None, datetime | None]:
        """Every org's open decisions at `now`: how many, the nearest deadline, and when
        the oldest was created (the queue's `age_seconds` counts from it)."""
        total, nearest, oldest = 0, None, None
        for org in self._by_org:
            total += self.count([org], now)
            for row in self._by_org[org]:  # deadline first: the first open one is nearest
                if row.expired(now):
                    continue
                if row.deadline is not None and (nearest is None or row.deadline < nearest):
                    nearest = row.deadline
                break
            for row in self._by_org[org]:
                older = row.created is not None and (oldest is None or row.created < oldest)
                if older and not row.expired(now):
                    oldest = row.created
        return total, nearest, oldest

    def rows(self, org_ids: Collection[uuid.UUID | str], now: datetime) -> Iterator[Row]:
        """The open decisions of `org_ids` at `now`, deadline first (none last)."""
        lists = [self._by_org[o] for o in {str(o) for o in org_ids} if o in self._by_org]
        merged: Iterator[Row] = (
            iter(lists[0]) if len(lists) == 1 else heapq.merge(*lists, key=_sort_key)
        )
        return (row for row in merged if not row.expired(now))

    def page_json(
        self,
        org_ids: Collection[uuid.UUID | str],
        now: datetime,
        *,
        offset: int,
        limit: int,
        near: timedelta,
    ) -> list[bytes]:
        """The JSON of the queue items `offset` to `offset + limit` of `org_ids`."""
        chosen = itertools.islice(self.rows(org_ids, now), offset, offset + limit)
        return [row.item(now, near) for row in chosen]

    # --- the watch ------------------------------------------------------------------------

    def _follow(self, event: TaskEvent) -> None:
        """Take in one watch event (its task parsed once, from the line)."""
        if event.type == "DELETED":
            self.forget_key(event.key)
        elif event.type in ("ADDED", "MODIFIED") and event.task is not None:
            self.observe_task(event.task)

    async def run(self, kube: KubeClient) -> None:
        """List, then watch, forever (until cancelled)."""
        while True:
            try:
                # a page at a time (no 100,000 parsed tasks at once), gathered
                # aside: readers see the previous state until the whole list is in
                rows: dict[Key, Row] = {}
                async for items, listed in kube.list_task_pages():
                    self._take(rows, items)
                    version = listed
                    del items
                self._swap(rows)
                del rows
                if not self.ready.is_set():
                    # Once, when the service has started and listed: what exists now (the
                    # imported modules above all) lives as long as the process, so it is
                    # moved out of the cyclic garbage collector's reach; a full collection
                    # otherwise walks it all (about 100 ms on 2 busy cores), a pause that
                    # any request may hit.
                    gc.freeze()
                self.ready.set()
                while True:
                    async for event in kube.watch_tasks(version):
                        version = event.version or version
                        self._follow(event)
            except KubeError as exc:
                if exc.status != 410:
                    log.warning("the task watch failed (%s); listing again", exc.reason)
                    await asyncio.sleep(RETRY_SECONDS)


DECISIONS: Slot[DecisionIndex | None] = Slot("decisions")
Decisions = Annotated[DecisionIndex | None, Depends(DECISIONS)]
"""The decision index fed by the watch, None without Kubernetes."""
