"""The review queue's memory (issue 17): the notifier holds only sorted deadlines, and the
index's copy of a task leaves out `metadata.managedFields`; the queue reads the same."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from humanwork_core.resources import AgenticTask
from platform_api.human_tasks.index import DecisionIndex
from platform_api.notify.deadlines import Deadlines

NOW = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
ORG = str(uuid.uuid4())


def test_deadlines_are_kept_sorted_and_read_by_window() -> None:
    due = Deadlines()
    due.put(("a", "late"), NOW + timedelta(hours=5))
    due.put(("a", "soon"), NOW + timedelta(minutes=5))
    due.put(("b", "edge"), NOW + timedelta(minutes=10))
    due.put(("b", "past"), NOW - timedelta(minutes=1))
    assert due.between(NOW, NOW + timedelta(minutes=10)) == [("a", "soon"), ("b", "edge")]
    due.put(("a", "soon"), NOW + timedelta(hours=6))  # a new deadline replaces the old
    assert due.between(NOW, NOW + timedelta(minutes=10)) == [("b", "edge")]
    assert due.between(NOW, NOW + timedelta(hours=6)) == [
        ("b", "edge"),
        ("a", "late"),
        ("a", "soon"),
    ]
    due.drop(("b", "edge"))
    due.drop(("b", "never"))
    assert len(due) == 3 and ("b", "edge") not in due
    assert due.between(NOW, NOW + timedelta(minutes=10)) == []


def _raw(name: str, minutes: int) -> dict[str, Any]:
    deadline = (NOW + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "humanwork.io/v1alpha1",
        "kind": "AgenticTask",
        "metadata": {
            "name": name,
            "namespace": "org-a",
            "uid": str(uuid.uuid4()),
            "resourceVersion": "7",
            "creationTimestamp": "2026-12-01T07:00:00Z",
            "managedFields": [{"manager": "bench", "fieldsV1": {"f:spec": {}}}],
        },
        "spec": {
            "orgId": ORG,
            "agentRef": {"name": "shop"},
            "description": f"Refund {name}",
            "requestedBy": "requester",
            "steps": [
                {"id": "refund", "description": "Refund", "tool": "shopify_refund", "risk": "high"}
            ],
        },
        "status": {
            "phase": "PendingApproval",
            "steps": [{"id": "refund", "state": "Pending", "deadline": deadline}],
        },
    }


def test_the_index_keeps_no_managed_fields_and_reads_the_same() -> None:
    index = DecisionIndex()
    seen: list[str] = []
    index.subscribe(lambda task: seen.append(task.metadata.name))
    raws = [_raw("later", 90), _raw("sooner", 30), _raw("middle", 60)]
    index.replace(raws)
    assert seen == ["later", "sooner", "middle"]  # every listed task is told, in order
    names = [row.key[1] for row in index.rows([ORG], NOW)]
    assert names == ["sooner", "middle", "later"]
    task = index.task("org-a", "sooner")
    assert task is not None
    assert "managedFields" not in (task.metadata.model_extra or {})
    without = {**raws[1], "metadata": {**raws[1]["metadata"]}}
    del without["metadata"]["managedFields"]
    assert task == AgenticTask.from_wire(without)

    index.replace([_raw("only", 45)])  # a relist holds exactly what it listed
    assert [row.key[1] for row in index.rows([ORG], NOW)] == ["only"]
    assert index.count([ORG], NOW) == 1 and index.task("org-a", "sooner") is None
