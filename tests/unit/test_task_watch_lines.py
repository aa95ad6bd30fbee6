"""The task watch's lines parsed once (`platform_api.kube.task_watch.decode`): the task
validated straight from the line's bytes is the one the dict path made, the index's rows
from raw lines equal the rows of the same tasks given as dicts (and the rows the old
compact copy made), and what is not a task is handled as before: a bookmark carries only
its version, an invalid task is skipped, a deletion forgets its task, and an ERROR line is
still raised as its typed error."""

from __future__ import annotations

import json
from typing import Any

import pytest

from humanwork_core.kube_errors import KubeGone
from humanwork_core.resources import AgenticTask
from platform_api.human_tasks import index as index_module
from platform_api.human_tasks.index import DecisionIndex
from platform_api.kube.task_watch import decode
from tests.unit.test_queue_memory import NOW, ORG, _raw


def _line(kind: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode()


def _old_compact(raw: dict[str, Any]) -> bytes:
    """The row's copy of a task as the dict path made it (json.dumps, managedFields out)."""
    meta = {k: v for k, v in raw["metadata"].items() if k != "managedFields"}
    return json.dumps({**raw, "metadata": meta}, separators=(",", ":")).encode()


def _decided(name: str) -> dict[str, Any]:
    """A task that ended (not open any more), with metadata the platform does not model
    and explicit nulls in a step's parameters."""
    raw = _raw(name, 30)
    raw["metadata"]["finalizers"] = ["humanwork.io/keep"]
    raw["spec"]["steps"][0]["parameters"] = {"order": "A-1", "note": None}
    raw["status"]["phase"] = "Cancelled"
    return raw


def test_a_task_line_is_the_task_the_dict_path_made() -> None:
    raw = _raw("sooner", 30)
    event = decode(_line("MODIFIED", raw))
    assert event.type == "MODIFIED" and event.version == "7"
    assert event.key == ("org-a", "sooner")
    assert event.task == AgenticTask.from_wire(raw)


def test_the_rows_from_lines_equal_the_rows_from_dicts() -> None:
    raws = [_raw("later", 90), _raw("sooner", 30), _raw("middle", 60)]
    raws[0]["spec"]["steps"][0]["parameters"] = {"amount": 12.5, "note": None}
    by_line, by_dict = DecisionIndex(), DecisionIndex()
    told: list[AgenticTask] = []
    by_line.subscribe(told.append)
    for raw in raws:
        task = decode(_line("ADDED", raw)).task
        assert task is not None
        by_line.observe_task(task)
        by_dict.observe(raw)
    assert [t.metadata.name for t in told] == ["later", "sooner", "middle"]
    rows = list(by_line.rows([ORG], NOW))
    assert [r.key[1] for r in rows] == ["sooner", "middle", "later"]
    assert rows == list(by_dict.rows([ORG], NOW))
    for raw in raws:
        row = next(r for r in rows if r.key[1] == raw["metadata"]["name"])
        # the copy reads back as the old compact copy did, managedFields left out
        assert row.task == AgenticTask.model_validate_json(_old_compact(raw))
        assert b"managedFields" not in row.raw
    assert b'"note":null' in rows[-1].raw  # an explicit null kept (a step's hash reads it)


def test_a_task_no_longer_open_leaves_the_index_and_is_told() -> None:
    index = DecisionIndex()
    told: list[str] = []
    index.subscribe(lambda task: told.append(task.metadata.name))
    for line in (_line("ADDED", _raw("t", 30)), _line("MODIFIED", _decided("t"))):
        task = decode(line).task
        assert task is not None
        index.observe_task(task)
    assert told == ["t", "t"] and len(index) == 0
    assert index.task("org-a", "t") is None


def test_a_bookmark_and_an_invalid_task_carry_their_version_only() -> None:
    marker = {"kind": "AgenticTask", "metadata": {"resourceVersion": "42"}}
    bookmark = decode(_line("BOOKMARK", marker))
    assert (bookmark.type, bookmark.task, bookmark.version) == ("BOOKMARK", None, "42")
    broken = _raw("broken", 30)
    del broken["spec"]["orgId"]
    event = decode(_line("MODIFIED", broken))
    assert event.task is None and event.version == "7" and event.key == ("org-a", "broken")
    index = DecisionIndex()
    told: list[str] = []
    index.subscribe(lambda task: told.append(task.metadata.name))
    index._follow(event)  # skipped, as the dict path skipped it
    index._follow(bookmark)
    assert told == [] and len(index) == 0


def test_a_deletion_forgets_the_task() -> None:
    index = DecisionIndex()
    forgotten: list[tuple[str, str]] = []
    index.subscribe(lambda task: None, forgotten.append)
    index._follow(decode(_line("ADDED", _raw("gone", 30))))
    assert len(index) == 1
    index._follow(decode(_line("DELETED", _raw("gone", 30))))
    assert len(index) == 0 and forgotten == [("org-a", "gone")]


def test_an_error_line_is_raised() -> None:
    status = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}
    with pytest.raises(KubeGone, match="too old"):
        decode(_line("ERROR", status))


def test_a_task_the_watch_just_parsed_is_read_without_parsing_it_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(index_module, "RECENT", 2)
    index = DecisionIndex()
    seen = {}
    for name in ("a", "b", "c"):
        task = decode(_line("ADDED", _raw(name, 30))).task
        assert task is not None
        index.observe_task(task)
        seen[name] = task
    assert index.task("org-a", "c") is seen["c"] and index.task("org-a", "b") is seen["b"]
    # "a" is past the last two: read back from its row's JSON, the same task
    first = index.task("org-a", "a")
    assert first is not None and first is not seen["a"]
    assert (first.metadata.uid, first.spec, first.status) == (
        seen["a"].metadata.uid,
        seen["a"].spec,
        seen["a"].status,
    )
    changed = _raw("b", 45)
    changed["metadata"]["resourceVersion"] = "8"
    newer = decode(_line("MODIFIED", changed)).task
    assert newer is not None
    index.observe_task(newer)
    assert index.task("org-a", "b") is newer  # never the version before the change
    index.observe_task(decode(_line("MODIFIED", _decided("c"))).task)  # type: ignore[arg-type]
    assert index.task("org-a", "c") is None  # closed: not read from the kept copy
    index.replace([_raw("b", 45)])  # a relist: every row new, none kept
    relisted = index.task("org-a", "b")
    assert relisted is not None and relisted is not newer
