"""`Deadlines`: the open decisions' deadlines, kept sorted, for the near-deadline look.

The notifier asks, every few seconds, which decisions fall due within the near-deadline
window. Looking at every open task each time costs time in proportion to the whole queue
(about a second per look at 100,000 open decisions); kept sorted, the look is two binary
searches and touches only the decisions inside the window. Only the key and the deadline
are held here (the task itself is read from the `DecisionIndex` when it is due).
"""

from __future__ import annotations

import bisect
from datetime import datetime

Key = tuple[str, str]


class Deadlines:
    """Keys with a deadline each, sorted by deadline."""

    def __init__(self) -> None:
        self._due: dict[Key, datetime] = {}
        self._sorted: list[tuple[datetime, Key]] = []

    def __len__(self) -> int:
        return len(self._due)

    def __contains__(self, key: object) -> bool:
        return key in self._due

    def put(self, key: Key, deadline: datetime) -> None:
        """`key` is due at `deadline` (replacing what it was due at before)."""
        if self._due.get(key) == deadline:
            return
        self.drop(key)
        self._due[key] = deadline
        bisect.insort(self._sorted, (deadline, key))

    def drop(self, key: Key) -> None:
        deadline = self._due.pop(key, None)
        if deadline is None:
            return
        at = bisect.bisect_left(self._sorted, (deadline, key))
        if at < len(self._sorted) and self._sorted[at] == (deadline, key):
            del self._sorted[at]

    def between(self, start: datetime, end: datetime) -> list[Key]:
        """The keys due from `start` to `end`, both included, soonest first."""
        lo = bisect.bisect_left(self._sorted, start, key=_deadline)
        hi = bisect.bisect_right(self._sorted, end, key=_deadline)
        return [key for _, key in self._sorted[lo:hi]]


def _deadline(entry: tuple[datetime, Key]) -> datetime:
    return entry[0]
