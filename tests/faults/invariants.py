"""The invariants every fault test ends with, as one pure function over what the world
shows after the fault (`violations`), and the call that gathers it from the running system
and fails the test with every broken invariant (`tests.faults.conftest.FaultWorld.check`).

What must hold, whatever was killed or cut:
- every approval the platform answered 2xx is in its task's status (a decision carrying
  the same idempotency key), and in the org's audit log;
- the fake upstream's ledger holds each approved step's side effect at most once, and
  exactly once for every side-effecting step the platform reports executed;
- no side effect without an approval: each one carries the key of an approved step;
- the audit chain and its signed checkpoints verify;
- every task is in a state the review queue shows with a next action: terminal, or an item
  in the queue (pending, escalated, outcome unknown, failed).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

WRITES = frozenset({"adjustInventoryLevel", "setInventoryLevel", "updateListingQuantity"})
"""The side-effecting actions the world's tasks use."""
SETTLED = frozenset({"Completed", "Rejected", "Cancelled", "Expired"})
"""Phases that need nobody (a `Failed` task needs its queue item: retry or not)."""
POSITIVE = frozenset({"approve", "edit", "provide", "select"})


@dataclass(frozen=True)
class Answered:
    """One approval the platform answered 2xx: task name, step, idempotency key."""

    task: str
    step: str
    key: str


@dataclass
class Observed:
    """What the world shows once the fault is over."""

    tasks: Mapping[str, Mapping[str, Any]]
    """Every task of the world by name, as `GET /agentic/tasks/{id}` shows it."""
    answered: Sequence[Answered]
    ledger: Sequence[tuple[str, str | None]]
    """The upstream's side effects in order: (action, Idempotency-Key)."""
    queue: Iterable[str]
    """The ids (`<ns>/<task>/<step>`) of the review queue's items."""
    namespace: str
    audited_keys: Iterable[str] = ()
    """Idempotency keys of the `task.step.approve` rows of the audit log."""
    audit_problems: Sequence[str] = field(default_factory=list)


def _steps(task: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {s["id"]: s for s in (task.get("status") or {}).get("steps") or []}


def _approvals(entry: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    found = [a for a in entry.get("approvals") or [] if a]
    decision = entry.get("decision")
    if decision:
        found.append(decision)
    return found


def _approved(entry: Mapping[str, Any]) -> bool:
    return any(d.get("verdict") in POSITIVE for d in _approvals(entry))


def _side_effecting(task: Mapping[str, Any]) -> list[str]:
    return [
        s["id"]
        for s in (task.get("spec") or {}).get("steps") or []
        if ((s.get("parameters") or {}).get("action")) in WRITES
    ]


def step_key(task: Mapping[str, Any], step: str) -> str:
    """The key the platform's proxy sends upstream for an approved step."""
    return f"step:{task['uid']}/{step}"


def violations(seen: Observed) -> list[str]:
    """Every broken invariant, in words (empty when all hold)."""
    found: list[str] = []
    audited = set(seen.audited_keys)
    for a in seen.answered:
        entry = _steps(seen.tasks.get(a.task) or {}).get(a.step) or {}
        if not any(d.get("idempotencyKey") == a.key for d in _approvals(entry)):
            found.append(f"approval {a.key} of {a.task}/{a.step} was answered 2xx and is lost")
        if a.key not in audited:
            found.append(f"approval {a.key} of {a.task}/{a.step} is not in the audit log")
    by_key = {
        step_key(task, step): (name, step, _steps(task).get(step) or {})
        for name, task in seen.tasks.items()
        for step in _side_effecting(task)
    }
    counts = Counter(key for _, key in seen.ledger)
    for key, count in counts.items():
        if key is None or key not in by_key:
            found.append(f"{count} side effect(s) with key {key!r}: no approved step of the world")
            continue
        name, step, entry = by_key[key]
        if count > 1:
            found.append(f"{name}/{step} reached the upstream {count} times")
        if not _approved(entry):
            found.append(f"{name}/{step} had a side effect without an approval")
    for key, (name, step, entry) in by_key.items():
        executed = (entry.get("execution") or {}).get("state") == "Succeeded"
        if executed and counts[key] != 1:
            found.append(f"{name}/{step} is reported executed with {counts[key]} side effects")
    queued = {item.split("/")[1] for item in seen.queue if item.startswith(f"{seen.namespace}/")}
    for name, task in seen.tasks.items():
        phase = (task.get("status") or {}).get("phase")
        if phase not in SETTLED and name not in queued:
            found.append(f"{name} is {phase} and not in the review queue: nobody can act on it")
    found.extend(f"audit: {p}" for p in seen.audit_problems)
    return found
