"""Benchmark: the platform's CPU for the change an approval causes, as its own task watch
and its notifier see it, the form before and now, in one process, alternated (so the
machine's load weighs on both alike).

- the watch's event of an approved task (one MODIFIED line as the API server sends it,
  `managedFields` and all) and the decision's read of the task it judges: before,
  `json.loads` of the line, `AgenticTask.from_wire` of the dict, and the row's JSON parsed
  again when the decision reads it (`Row.task`); now, `kube.task_watch.decode` (one
  pydantic parse from the bytes) and the parsed task kept (`DecisionIndex.task`);
- a task opened (its ADDED line, a row made): before, the dict path and the row's copy
  dumped with `json.dumps`; now, the one parse and the copy dumped by pydantic;
- the notifier's batch of one approval's event on a throwaway PostgreSQL (migrated, one
  org): before, a transaction (BEGIN, the event log's insert, the org's webhook read,
  COMMIT) through SQLAlchemy's session; now, one statement on a connection that
  autocommits (`notify.batch_sql`).

The figure is this process's CPU per change (`time.process_time`; PostgreSQL's own work is
another process's), on uvloop as the platform runs, the best of ROUNDS. Run by hand; it
prints and asserts nothing.

    .venv/bin/python bench/approval_change.py [--calls 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import uvloop
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from humanwork_core.resources import AgenticTask
from humanwork_dev.postgres import PostgresServer
from platform_api.db import make_engine, make_sessionmaker, migrate
from platform_api.human_tasks.index import DecisionIndex
from platform_api.kube.task_watch import decode
from platform_api.models import Org
from platform_api.notify import events, watch
from platform_api.notify.watch import TaskNotifier, _Batch
from platform_api.settings import Settings

ORG_ID = uuid.uuid4()
NAMESPACE = "org-bench"
Sessions = async_sessionmaker[AsyncSession]


def _wire(name: str, approved: bool) -> dict[str, Any]:
    """A task as the API server sends it: open (its step pending) or its step approved."""
    step: dict[str, Any] = {"id": "refund", "state": "Pending", "deadline": "2026-12-09T00:00:00Z"}
    status: dict[str, Any] = {"phase": "PendingApproval", "currentStep": "refund"}
    if approved:
        decision = {"verdict": "approve", "by": "expert", "at": "2026-12-02T10:00:00Z",
                    "idempotencyKey": "k" * 32, "stepHash": "0" * 64}  # fmt: skip
        step = {"id": "refund", "state": "Approved", "decision": decision}
        status = {"phase": "InProgress", "currentStep": "refund"}
    manager = {"manager": "humanwork-platform-api", "operation": "Apply", "apiVersion": "v1",
               "time": "2026-12-02T10:00:00Z", "fieldsType": "FieldsV1",
               "fieldsV1": {"f:status": {"f:phase": {}, "f:steps": {}}}}  # fmt: skip
    refund = {"id": "refund", "description": "Refund", "tool": "shopify_refund",
              "parameters": {"order": "1001", "amount": 12.5}, "risk": "high"}  # fmt: skip
    return {
        "apiVersion": "humanwork.io/v1alpha1",
        "kind": "AgenticTask",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": str(uuid.uuid4()),
            "resourceVersion": "100",
            "generation": 1,
            "creationTimestamp": "2026-12-02T10:00:00Z",
            "managedFields": [manager, {**manager, "manager": "humanwork-operator"}],
        },
        "spec": {
            "orgId": str(ORG_ID),
            "agentRef": {"name": "shop"},
            "description": "Refund order 1001",
            "requestedBy": "requester",
            "steps": [refund],
        },
        "status": {**status, "steps": [step]},
    }


def _line(kind: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": obj}, separators=(",", ":")).encode()


OPENED, APPROVED = _line("ADDED", _wire("t", False)), _line("MODIFIED", _wire("t", True))


def _old_compact(raw: dict[str, Any]) -> bytes:
    meta = {k: v for k, v in raw["metadata"].items() if k != "managedFields"}
    return json.dumps({**raw, "metadata": meta}, separators=(",", ":")).encode()


INDEX = DecisionIndex()
INDEX.observe_task(decode(OPENED).task)  # type: ignore[arg-type]
ROW_JSON = _old_compact(json.loads(OPENED)["object"])


async def _approved_before(_: Any, __: int) -> None:
    AgenticTask.model_validate_json(ROW_JSON)  # the decision's read of its row
    AgenticTask.from_wire(json.loads(APPROVED)["object"])


async def _approved_now(_: Any, __: int) -> None:
    INDEX.task(NAMESPACE, "t")
    decode(APPROVED)


async def _opened_before(_: Any, __: int) -> None:
    raw = json.loads(OPENED)["object"]
    AgenticTask.from_wire(raw)
    _old_compact(raw)


async def _opened_now(_: Any, __: int) -> None:
    task = decode(OPENED).task
    assert task is not None
    task.model_dump_json(by_alias=True, exclude_unset=True, exclude={"metadata": {"managedFields"}})


def _batch(n: int) -> _Batch:
    task = AgenticTask.from_wire({**_wire(f"t{n}", True)})
    found = [e for e in events.task_events(task) if e.event == events.DECIDED]
    return _Batch((NAMESPACE, f"t{n}"), str(ORG_ID), NAMESPACE, found, None)


BATCHES: dict[int, _Batch] = {}


async def _batch_before(notifier: TaskNotifier, n: int) -> None:
    async def plain(_: AsyncSession) -> None:
        return None

    saved = watch.autocommitting, watch.autocommit_driver
    watch.autocommitting, watch.autocommit_driver = plain, lambda _: None  # type: ignore[assignment]
    try:
        await notifier._record([BATCHES.pop(n)])
    finally:
        watch.autocommitting, watch.autocommit_driver = saved  # type: ignore[assignment]


async def _batch_now(notifier: TaskNotifier, n: int) -> None:
    await notifier._record([BATCHES.pop(n)])


Call = Callable[[Any, int], Awaitable[None]]
PAIRS: list[tuple[str, Call, Call, bool]] = [
    ("the approval's watch event and task read", _approved_before, _approved_now, False),
    ("a task opened (ADDED, its row's copy)", _opened_before, _opened_now, False),
    ("the notifier's batch of one approval", _batch_before, _batch_now, True),
]


async def _cpu_per_call(notifier: TaskNotifier, call: Call, calls: int, offset: int) -> float:
    start = time.process_time()
    for n in range(calls):
        await call(notifier, offset + n)
    return (time.process_time() - start) / calls * 1e6


async def _run(url: str, calls: int, rounds: int) -> None:
    engine = make_engine(url)
    await migrate(engine)
    sessions = make_sessionmaker(engine)
    async with sessions() as session, session.begin():
        session.add(Org(id=ORG_ID, slug="bench", name="Bench", namespace=NAMESPACE))
    notifier = TaskNotifier(sessions, Settings(database_url=url), deliverer=None)
    print(f"CPU per change in this process, µs (best of {rounds} rounds of {calls}):")
    print(f"  {'work':44} {'before':>8} {'now':>8} {'saved':>8}")
    for name, before, now, batches in PAIRS:
        best = [float("inf"), float("inf")]
        for round_ in range(rounds):
            for i, call in enumerate((before, now)):
                offset = (round_ * 2 + i) * calls
                if batches:
                    BATCHES.update((offset + n, _batch(offset + n)) for n in range(calls))
                spent = await _cpu_per_call(notifier, call, calls, offset)
                best[i] = min(best[i], spent)
        print(f"  {name:44} {best[0]:8.0f} {best[1]:8.0f} {best[0] - best[1]:8.0f}")
    await engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}")
    uvloop.install()  # the platform's loop (its round trips cost less CPU than asyncio's)
    with PostgresServer() as postgres:
        url = asyncio.run(postgres.create_database("changes"))
        asyncio.run(_run(url, args.calls, args.rounds))
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
