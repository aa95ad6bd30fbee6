"""A profiling hook for `bench/provision.py --snapshots` (never part of the product).

Put this folder first on the operator's PYTHONPATH and set HUMANWORK_HEAP_DIR:

    bench/provision.py --snapshots --operator-env PYTHONPATH=bench/heap_hook:. \
        --operator-env HUMANWORK_HEAP_DIR=/tmp/heap

Python imports `sitecustomize` at start, so the operator then traces its allocations
(tracemalloc, `HUMANWORK_HEAP_FRAMES` frames, 10 by default; with
`HUMANWORK_HEAP_TRACE=late` from the first SIGUSR1 on, so that a process whose start is
timed starts at full speed; `0`: never) and, on each SIGUSR1, writes `N.txt` into that
folder: its RSS, the memory tracemalloc sees (live Python objects), the 25 biggest
allocation sites, the 25 most numerous live object types and the count of each type named
in `HUMANWORK_HEAP_TYPES` (comma-separated). Traced memory that does not grow while RSS
does means memory the allocators hold rather than objects the operator keeps
(tracemalloc's own bookkeeping and the snapshot add to RSS, so compare traced with
traced). With tracing on, each dump also saves the snapshot itself as `N.snap`;
`bench/heap_diff.py A.snap B.snap` prints what grew between two of them, by traceback.

`bench/soak.py --platform-heap DIR` puts this hook on the platform's process alone and
signals it every `--heap-every` seconds.
"""

from __future__ import annotations

import collections
import gc
import os
import signal
import sys
import tracemalloc
from pathlib import Path

_DIR = os.environ.get("HUMANWORK_HEAP_DIR")


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _mappings() -> list[str]:
    """Resident memory by kind of mapping: the C heap (brk), anonymous mappings (pymalloc's
    arenas, large buffers, thread stacks) and files (code)."""
    rss: collections.Counter[str] = collections.Counter()
    kind = "other"
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if head and "-" in head[0] and len(head) >= 5:
            name = head[5] if len(head) > 5 else ""
            kind = "[heap]" if name == "[heap]" else ("file" if name.startswith("/") else "anon")
        elif head and head[0] == "Rss:":
            rss[kind] += int(head[1])
    return [f"  {kind:8} {kib / 1024:7.1f} MiB" for kind, kib in rss.most_common()]


def _pymalloc() -> list[str]:
    """pymalloc's arenas: how many, and how full (sys._debugmallocstats writes to fd 2)."""
    out = Path(_DIR or ".") / "pymalloc.tmp"
    saved = os.dup(2)
    try:
        with out.open("wb") as sink:
            os.dup2(sink.fileno(), 2)
            sys._debugmallocstats()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    wanted = ("# arenas allocated current", "# bytes in allocated blocks",
              "# bytes in available blocks", "# bytes lost to")  # fmt: skip
    found = [f"  {line}" for line in out.read_text().splitlines() if line.startswith(wanted)]
    out.unlink()
    return found


def _dump(_signum: int, _frame: object) -> None:
    assert _DIR is not None
    folder = Path(_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    n = len(list(folder.glob("*.txt")))
    gc.collect()
    lines = [f"RSS {_rss_mib():.0f} MiB", "resident by mapping:", *_mappings(), "pymalloc:"]
    lines += _pymalloc()
    types = collections.Counter(type(o).__name__ for o in gc.get_objects())
    if tracemalloc.is_tracing():
        snapshot = tracemalloc.take_snapshot()
        snapshot.dump(str(folder / f"{n}.snap"))  # for bench/heap_diff.py
        current, peak = tracemalloc.get_traced_memory()
        lines += [f"traced {current / 2**20:.1f} MiB (peak {peak / 2**20:.1f} MiB)", "",
                  "top allocation sites:"]  # fmt: skip
        for stat in snapshot.statistics("traceback")[:25]:
            lines.append(f"{stat.size / 2**20:8.2f} MiB {stat.count:9d} blocks")
            lines.extend(f"    {frame}" for frame in stat.traceback.format()[-6:])
    lines += ["", "live objects by type (gc-tracked):"]
    lines += [f"{count:9d} {name}" for name, count in types.most_common(25)]
    watched = [n for n in os.environ.get("HUMANWORK_HEAP_TYPES", "").split(",") if n]
    if watched:  # named types, however few: the ones a run looks for
        lines += ["", "watched types:"] + [f"{types[n]:9d} {n}" for n in watched]
    (folder / f"{n}.txt").write_text("\n".join(lines) + "\n")


def _first(signum: int, frame: object) -> None:
    """`late`: start tracing at the first signal (what follows is traced, not the start)."""
    tracemalloc.start(_FRAMES)
    signal.signal(signal.SIGUSR1, _dump)
    _dump(signum, frame)


if _DIR:
    _TRACE = os.environ.get("HUMANWORK_HEAP_TRACE", "1")  # 0: no tracemalloc (full speed)
    _FRAMES = int(os.environ.get("HUMANWORK_HEAP_FRAMES", "10"))
    if _TRACE == "1":
        tracemalloc.start(_FRAMES)
    signal.signal(signal.SIGUSR1, _first if _TRACE == "late" else _dump)
