"""One line of the AgenticTask watch, parsed once: `decode` turns the line's bytes into a
`TaskEvent` holding the task already validated (`AgenticTask`, by pydantic straight from
the bytes: no `json.loads` to a dict and a second validation of the dict), its event type,
and its resourceVersion.

A line whose object is no valid AgenticTask (a bookmark, which carries only metadata; a
task the platform cannot read) is parsed as plain JSON instead: its `raw` object, with
the resourceVersion to resume from. A watch's ERROR event is raised as its typed
`KubeError` (410 `KubeGone` when the version is too old), as the dict-based stream did.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from humanwork_core.kube_errors import error_from_status
from humanwork_core.resources import AgenticTask


class _Change(BaseModel):
    """A watch event whose object is a valid AgenticTask."""

    model_config = ConfigDict(frozen=True)

    type: str
    object: AgenticTask


@dataclass(frozen=True, slots=True)
class TaskEvent:
    """A watch event: its type (ADDED, MODIFIED, DELETED, BOOKMARK), the task when the
    object is a valid one, else the object as plain JSON (`raw`)."""

    type: str
    task: AgenticTask | None
    raw: dict[str, Any]
    version: str
    """The object's resourceVersion ("" when it has none)."""

    @property
    def key(self) -> tuple[str, str]:
        """The object's (namespace, name)."""
        if self.task is not None:
            return self.task.metadata.namespace or "", self.task.metadata.name
        meta = self.raw.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        return str(meta.get("namespace", "")), str(meta.get("name", ""))


def decode(line: bytes) -> TaskEvent:
    """The event of one watch line (see the module docstring)."""
    try:
        change = _Change.model_validate_json(line)
    except ValidationError:
        return _plain(json.loads(line))
    task = change.object
    return TaskEvent(change.type, task, {}, task.metadata.resource_version or "")


def _plain(event: dict[str, Any]) -> TaskEvent:
    """An event whose object is no valid task: an ERROR raised, anything else as JSON."""
    obj = event.get("object")
    obj = dict(obj) if isinstance(obj, dict) else {}
    kind = str(event.get("type") or "")
    if kind == "ERROR":
        raise error_from_status(int(obj.get("code") or 500), obj)
    meta = obj.get("metadata")
    version = meta.get("resourceVersion") if isinstance(meta, dict) else None
    return TaskEvent(kind, None, obj, str(version or ""))
