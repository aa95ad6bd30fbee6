"""A profiling hook for `bench/provision.py --snapshots` (never part of the product).

Put this folder first on the operator's PYTHONPATH and set HUMANWORK_HEAP_DIR:

    bench/provision.py --snapshots --operator-env PYTHONPATH=bench/heap_hook:. \
        --operator-env HUMANWORK_HEAP_DIR=/tmp/heap

Python imports `sitecustomize` at start, so the operator then traces its allocations
(tracemalloc, 10 frames) and, on each SIGUSR1, writes `N.txt` into that folder: its RSS,
the memory tracemalloc sees (live Python objects), the 25 biggest allocation sites and the
25 most numerous live object types. Traced memory that does not grow while RSS does means
memory the allocators hold rather than objects the operator keeps (tracemalloc's own
bookkeeping and the snapshot add to RSS, so compare traced with traced).
"""

from __future__ import annotations

import collections
import gc
import os
import signal
import tracemalloc
from pathlib import Path

_DIR = os.environ.get("HUMANWORK_HEAP_DIR")


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _dump(_signum: int, _frame: object) -> None:
    assert _DIR is not None
    folder = Path(_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    n = len(list(folder.glob("*.txt")))
    gc.collect()
    snapshot = tracemalloc.take_snapshot()
    current, peak = tracemalloc.get_traced_memory()
    types = collections.Counter(type(o).__name__ for o in gc.get_objects())
    lines = [f"RSS {_rss_mib():.0f} MiB; traced {current / 2**20:.1f} MiB "
             f"(peak {peak / 2**20:.1f} MiB)", "", "top allocation sites:"]  # fmt: skip
    for stat in snapshot.statistics("traceback")[:25]:
        lines.append(f"{stat.size / 2**20:8.2f} MiB {stat.count:9d} blocks")
        lines.extend(f"    {frame}" for frame in stat.traceback.format()[-6:])
    lines += ["", "live objects by type (gc-tracked):"]
    lines += [f"{count:9d} {name}" for name, count in types.most_common(25)]
    (folder / f"{n}.txt").write_text("\n".join(lines) + "\n")


if _DIR:
    tracemalloc.start(10)
    signal.signal(signal.SIGUSR1, _dump)
