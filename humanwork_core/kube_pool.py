"""The connection pool to the API server: it gives back what a burst took.

aiohttp's connector reuses its idle keep-alive connections first in, first out (since
aiohttp 3.11). Under a steady load every pooled connection is then used again within its
keep-alive (15 s) and none is ever closed: the pool stays at the most requests ever in
flight at once, each TLS connection holding about 300 KiB (asyncio's read buffer,
OpenSSL's state) for the life of the process. `reuse_most_recent_first` makes a connector
reuse the most recently released connection first instead: a steady load keeps using the
same few, and the surplus of a burst idles past its keep-alive and is closed by the
connector's own periodic cleanup.

The lean client of the platform API and the operator (`humanwork_core.kube_client`) applies
it to its connector. This module imports no aiohttp: humanwork_core also ships in the
agent's image, which has no aiohttp.
"""

from __future__ import annotations

from typing import Any

__all__ = ["reuse_most_recent_first"]


def reuse_most_recent_first(connector: Any) -> None:
    """Make an `aiohttp.TCPConnector`, before it holds any connection, reuse its idle
    connections most recently released first.

    What it relies on, in aiohttp 3.11 to 3.x (pinned in pyproject.toml: `aiohttp>=3.11,<4`):
    the idle connections of a host are the deque `connector._conns[key]` of
    `(protocol, released at)`; `connector._release(key, protocol, should_close=...)`
    appends a released connection on the right and `_get` takes the next one from the
    left (first in, first out). Rotating the one just released to the left makes `_get`
    take it first; `_get` and `_cleanup` still close each connection idle past the
    keep-alive, now the least recently used ones at the right. Before 3.11 the pool was a
    list taken from its end (most recent first already), hence the lower bound.
    tests/platform_k8s/test_kube_pool.py checks the behaviour on a real API server: it
    fails if an aiohttp release changes this shape.
    """
    if connector is None or type(connector).__name__ != "TCPConnector":
        raise TypeError(f"expected an aiohttp.TCPConnector, got {type(connector).__name__}")
    release = connector._release

    def release_most_recent_first(key: Any, protocol: Any, *, should_close: bool = False) -> None:
        release(key, protocol, should_close=should_close)
        idle = connector._conns.get(key)
        if idle and idle[-1][0] is protocol:  # kept for reuse (not closed)
            idle.rotate(1)

    connector._release = release_most_recent_first
