"""The invariant checker can fail: each invariant broken on purpose on a world of three
tasks (a double-sent ledger, a side effect nobody approved, a lost approval, a task nobody
can act on, an executed step without its side effect, a broken audit chain), beside the
same world intact, which passes."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.faults.invariants import Answered, Observed, violations

NS = "org-x"
WRITE = {"action": "adjustInventoryLevel", "params": {"available_adjustment": -1}}


def task(uid: str, phase: str, decided: bool, executed: bool) -> dict[str, Any]:
    step: dict[str, Any] = {"id": "fix", "state": "Pending"}
    if decided:
        step["approvals"] = [{"verdict": "approve", "by": "e", "idempotencyKey": f"k-{uid}"}]
        step["decision"] = {"verdict": "approve", "by": "e", "idempotencyKey": f"k-{uid}"}
    if executed:
        step["execution"] = {"state": "Succeeded", "attempt": 1}
    return {
        "uid": uid,
        "spec": {"steps": [{"id": "fix", "tool": "shopify", "parameters": WRITE}]},
        "status": {"phase": phase, "steps": [step]},
    }


def intact() -> Observed:
    return Observed(
        tasks={
            "done": task("u1", "Completed", True, True),
            "waiting": task("u2", "PendingApproval", False, False),
            "rejected": task("u3", "Rejected", False, False),
        },
        answered=[Answered("done", "fix", "k-u1")],
        ledger=[("adjustInventoryLevel", "step:u1/fix")],
        queue=[f"{NS}/waiting/fix"],
        namespace=NS,
        audited_keys=["k-u1"],
    )


def test_the_intact_world_passes() -> None:
    assert violations(intact()) == []


def broken(change: str) -> Observed:
    seen = intact()
    tasks = copy.deepcopy(dict(seen.tasks))
    if change == "double":
        seen.ledger = [*seen.ledger, ("adjustInventoryLevel", "step:u1/fix")]
    elif change == "unapproved":
        seen.ledger = [*seen.ledger, ("adjustInventoryLevel", "step:u2/fix")]
    elif change == "unkeyed":
        seen.ledger = [*seen.ledger, ("adjustInventoryLevel", None)]
    elif change == "lost":
        tasks["done"] = task("u1", "Completed", False, True)
    elif change == "unaudited":
        seen.audited_keys = []
    elif change == "stuck":
        seen.queue = []
    elif change == "missing":
        seen.ledger = []
    elif change == "audit":
        seen.audit_problems = ["org:x row 3: hash mismatch"]
    seen.tasks = tasks
    return seen


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ("double", "reached the upstream 2 times"),
        ("unapproved", "side effect without an approval"),
        ("unkeyed", "no approved step of the world"),
        ("lost", "was answered 2xx and is lost"),
        ("unaudited", "is not in the audit log"),
        ("stuck", "nobody can act on it"),
        ("missing", "reported executed with 0 side effects"),
        ("audit", "hash mismatch"),
    ],
)
def test_each_broken_invariant_is_reported(change: str, words: str) -> None:
    found = violations(broken(change))
    assert any(words in line for line in found), found
