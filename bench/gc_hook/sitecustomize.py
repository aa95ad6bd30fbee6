"""A measuring hook for `bench/decisions.py --gc` (never part of the product).

Put this folder first on the platform's PYTHONPATH and set HUMANWORK_GC_FILE: Python
imports `sitecustomize` at start, so the process then times each of its cyclic garbage
collector's runs (`gc.callbacks`, the collecting thread's CPU time) and, every 0.1 s,
rewrites that file with the totals so far as one JSON object: `seconds` (CPU spent
collecting), `collections` (per generation) and `threshold` (as the process has it then).
py-spy cannot show this share: a collection runs inside whatever allocation set it off,
and its samples land in that frame.
"""

from __future__ import annotations

import gc
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

_FILE = os.environ.get("HUMANWORK_GC_FILE")


def _install(path: Path) -> None:
    totals: dict[str, Any] = {"seconds": 0.0, "collections": [0, 0, 0]}
    started = [0.0]

    def timed(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.thread_time()
            return
        totals["seconds"] += time.thread_time() - started[0]
        totals["collections"][info["generation"]] += 1

    def report() -> None:
        while True:
            time.sleep(0.1)
            text = json.dumps({**totals, "threshold": gc.get_threshold()})
            scratch = path.with_suffix(".new")
            scratch.write_text(text)
            scratch.replace(path)  # whole, never half written

    gc.callbacks.append(timed)
    threading.Thread(target=report, name="gc-report", daemon=True).start()


if _FILE:
    _install(Path(_FILE))
