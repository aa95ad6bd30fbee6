"""`Last-Event-ID` as a stream's cursor: digits only, capped where an integer key ends, so a
forged header can neither crash the stream's query nor reach past the last row."""

from __future__ import annotations

import pytest

from platform_api.bounds import MAX_ROW_ID, event_cursor


@pytest.mark.parametrize(
    ("header", "cursor"),
    [
        ("0", 0),
        (" 42 ", 42),
        (str(MAX_ROW_ID), MAX_ROW_ID),
        (str(MAX_ROW_ID + 1), MAX_ROW_ID),
        ("9" * 64, MAX_ROW_ID),
    ],
)
def test_a_number_is_the_cursor_capped_at_the_last_possible_row(header: str, cursor: int) -> None:
    assert event_cursor(header) == cursor


@pytest.mark.parametrize("header", [None, "", " ", "-1", "1.5", "abc", "²", "١٢", "0x10"])
def test_anything_else_starts_the_stream_now(header: str | None) -> None:
    assert event_cursor(header) is None
