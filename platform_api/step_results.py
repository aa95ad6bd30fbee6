"""A step's outcome in a few words, as a client reads it: the client's view of a task
(`conversations.taskview`) and the system message that tells a step's run in its
conversation (`notify.progress`) say the same thing. Pure; redacted like the queue."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import JsonValue

from platform_api.redaction import redact

RESULT_CHARS = 300


def compact(value: JsonValue) -> str:
    """A JSON value on one line (at most ten items of a list or object)."""
    if isinstance(value, list):
        return ", ".join(compact(v) for v in value[:10]) + (" …" if len(value) > 10 else "")
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {compact(v)}" for k, v in list(value.items())[:10]) + "}"
    return str(value)


def result_text(result: Mapping[str, Any] | None, error: str | None) -> str | None:
    """The failure's reason, else the result's own `summary`, else the result itself,
    compacted; redacted and cut to `RESULT_CHARS` (None: nothing to say)."""
    text: str | None = None
    if error:
        text = error
    elif result:
        said = result.get("summary")
        text = said if isinstance(said, str) else compact(dict(result))
    if text is None:
        return None
    text = redact(text)[0]
    return text if len(text) <= RESULT_CHARS else text[: RESULT_CHARS - 1] + "…"
