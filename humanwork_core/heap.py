"""Give the memory the C allocator holds free back to the system.

CPython hands every object over 512 bytes (response bodies, JSON, TLS buffers, dict
tables) to the C allocator. glibc keeps the freed memory mapped for later, and under a
steady load of mixed sizes its main heap only grows: the holes between live blocks are
too small or too scattered for the next requests, so it extends the heap instead. The
process's resident memory then climbs while what it holds live stays flat (measured in
docs/performance.md, "Soak"). `trim` asks glibc's `malloc_trim` to return the free pages,
in the heap's middle as at its top; on a C library without it (musl) it does nothing.

One mechanism says when (`Trimmer`): at a steady interval while busy (a steady load never
goes quiet, and its holes add up), and once the process has gone quiet for a while after
work it noted (`Trimmer.active`: a burst's peak is given back without waiting for the
interval). The platform API runs it on its own (`trim_every`, the interval only); the
operator notes its events and reconciles and ticks it from its scheduler.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import time
from collections.abc import Callable

_trim: Callable[[int], int] | None = None
try:
    _trim = ctypes.CDLL(ctypes.util.find_library("c") or None).malloc_trim
except (OSError, AttributeError):  # not glibc
    _trim = None


def trim() -> bool:
    """Return the free memory at the heap's top and in its middle to the system; whether
    the C library could (glibc: yes)."""
    if _trim is None:
        return False
    _trim(0)
    return True


class Trimmer:
    """When to trim: every `every` seconds, and `quiet` seconds after the last work noted
    with `active` (if not trimmed since); either <= 0: not on that ground."""

    def __init__(
        self,
        every: float,
        quiet: float = 0.0,
        trimmer: Callable[[], object] = trim,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.every, self.quiet = every, quiet
        self._trimmer, self._clock = trimmer, clock
        self.last_active = self.trimmed_at = clock()
        self.trimmed = True

    def active(self) -> None:
        """Note work just done: its freed memory is given back once quiet for `quiet`."""
        self.last_active, self.trimmed = self._clock(), False

    def next_in(self) -> float:
        """Seconds until the next trim is due (0: now; infinite: never)."""
        now, waits = self._clock(), [float("inf")]
        if self.every > 0:
            waits.append(self.trimmed_at + self.every - now)
        if self.quiet > 0 and not self.trimmed:
            waits.append(self.last_active + self.quiet - now)
        return max(0.0, min(waits))

    def tick(self) -> bool:
        """Trim if it is due; whether it did."""
        if self.next_in() > 0:
            return False
        self._trimmer()
        self.trimmed, self.trimmed_at = True, self._clock()
        return True


async def trim_every(seconds: float, trimmer: Callable[[], object] = trim) -> None:
    """Trim every `seconds`, forever (until cancelled); `seconds` <= 0: never."""
    if seconds <= 0:
        return
    when = Trimmer(seconds, trimmer=trimmer)
    while True:
        await asyncio.sleep(when.next_in())
        when.tick()
