"""Give the memory a burst freed back to the system.

A burst of reconciles (hundreds of orgs at once) allocates response bodies, TLS buffers
and manifests that are freed when it ends, but the C allocator keeps the freed pages
mapped, so the operator's resident memory stays at its peak. `trim` asks glibc's
`malloc_trim` to return them; on a C library without it (musl) it does nothing. The
scheduler calls it when the operator has gone quiet (:mod:`agent_operator.handlers`).
"""

from __future__ import annotations

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
