"""Give the memory the C allocator holds free back to the system.

CPython hands every object over 512 bytes (response bodies, JSON, TLS buffers, dict
tables) to the C allocator. glibc keeps the freed memory mapped for later, and under a
steady load of mixed sizes its main heap only grows: the holes between live blocks are
too small or too scattered for the next requests, so it extends the heap instead. The
process's resident memory then climbs while what it holds live stays flat (measured in
docs/performance.md, "Soak"). `trim` asks glibc's `malloc_trim` to return the free pages,
in the heap's middle as at its top; on a C library without it (musl) it does nothing.

The operator trims when it goes quiet after a burst, and both it and the platform API
trim at a steady interval while busy (`trim_every`).
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
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


async def trim_every(seconds: float, trimmer: Callable[[], object] = trim) -> None:
    """Trim every `seconds`, forever (until cancelled); `seconds` <= 0: never."""
    if seconds <= 0:
        return
    while True:
        await asyncio.sleep(seconds)
        trimmer()
