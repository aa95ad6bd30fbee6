"""How often CPython's cyclic garbage collector runs in a serving process.

CPython collects its youngest generation each time 700 more container objects (dicts,
lists, models, frames of coroutines) exist than at the last collection. A server with
requests in flight always holds a few thousand such objects that live for a request's
few milliseconds: at 700, each collection walks them, finds them alive and promotes them,
and the older generations' collections (and the full one, which walks everything not
frozen) follow ten times less often. An approval in the platform allocated enough for
one young collection in four approvals, a middle one in forty-five, and 5.9 % of its CPU went
to the collector (docs/performance.md, "The garbage collector's share").

`tune` raises the youngest generation's threshold: most request objects are freed by
their reference counts before a collection comes, so collections are fewer and each walks
about as many survivors. Garbage held in cycles waits a little longer (a few thousand
objects at most). The older generations keep their thresholds.
"""

from __future__ import annotations

import gc

YOUNG = 7_000
"""The youngest generation's threshold in a serving process (Python's default: 700)."""


def tune(young: int = YOUNG) -> None:
    """Collect the youngest generation every `young` allocations; the older generations'
    thresholds unchanged."""
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(young, middle, oldest)
