"""The bounds of the query parameters that page through lists, shared by every router.

An offset or a limit outside these bounds answers 422 `validation_failed` (the stable
error body of `platform_api.errors`) before any handler runs, and the bounds are in the
OpenAPI document (`minimum`, `maximum`) so that clients see them. `MAX_OFFSET` keeps
`offset + limit` far inside what every backend and `itertools.islice` accept (64-bit
integers); a page past the last item is empty, so a larger offset could only ever answer
an empty page. To reach further back in the audit log, narrow it with `since`/`until`.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

MAX_OFFSET = 1_000_000
"""The largest offset any list accepts."""

MAX_LIMIT = 500
"""The most items one page of a list holds."""

MAX_ROW_ID = 2**31 - 1
"""The largest id of a row with an integer key (32 bits in PostgreSQL): a cursor or an
`after` past it could only ever answer nothing, and the database refuses it in a query."""

MAX_DOCUMENT_LIMIT = 200
"""The most knowledge documents one page holds (each may be 100,000 characters)."""

Offset = Annotated[
    int, Query(ge=0, le=MAX_OFFSET, description=f"items to skip (0 to {MAX_OFFSET})")
]
Limit = Annotated[
    int, Query(ge=1, le=MAX_LIMIT, description=f"items in the page (1 to {MAX_LIMIT})")
]
DocumentLimit = Annotated[
    int,
    Query(
        ge=1,
        le=MAX_DOCUMENT_LIMIT,
        description=f"documents in the page (1 to {MAX_DOCUMENT_LIMIT})",
    ),
]


def event_cursor(last_event_id: str | None) -> int | None:
    """The cursor a `Last-Event-ID` header names: its ASCII digits as a number, capped at
    `MAX_ROW_ID`; None when it is absent or not a number (the stream then starts now)."""
    text = (last_event_id or "").strip()
    if not text or not (text.isascii() and text.isdigit()):
        return None
    return min(int(text), MAX_ROW_ID)
