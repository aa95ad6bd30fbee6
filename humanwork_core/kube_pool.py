"""The connection pool to the API server: it gives back what a burst took.

aiohttp's connector reuses its idle keep-alive connections first in, first out (since
aiohttp 3.11). Under a steady load every pooled connection is then used again within its
keep-alive (15 s) and none is ever closed: the pool stays at the most requests ever in
flight at once, each TLS connection holding about 300 KiB (asyncio's read buffer,
OpenSSL's state) for the life of the process. `RecentFirstConnector` reuses the most
recently released connection first instead: a steady load keeps using the same few, and
the surplus of a burst idles past its keep-alive and is closed by the connector's own
periodic cleanup.

Both the platform API (whose client library builds its connector itself: `recent_first`)
and the operator (which builds its own) use it.
"""

from __future__ import annotations

import aiohttp
from aiohttp.client_proto import ResponseHandler
from aiohttp.client_reqrep import ConnectionKey

__all__ = ["RecentFirstConnector", "recent_first"]


class RecentFirstConnector(aiohttp.TCPConnector):
    """A `TCPConnector` whose idle connections are reused most recent first.

    What it relies on, in aiohttp 3.11 to 3.x (pinned in pyproject.toml: `aiohttp>=3.11,<4`):
    the idle connections of a host are the deque `self._conns[key]` of
    `(protocol, released at)`; `_release` appends a released connection on the right and
    `_get` takes the next one from the left (first in, first out). Rotating the one just
    released to the left makes `_get` take it first; `_get` and `_cleanup` still close
    each connection idle past the keep-alive, now the least recently used ones at the
    right. Before 3.11 the pool was a list taken from its end (already most recent
    first), hence the lower bound. tests/platform_k8s/test_kube_pool.py checks the
    behaviour on a real API server: it fails if an aiohttp release changes this shape.
    """

    def _release(
        self, key: ConnectionKey, protocol: ResponseHandler, *, should_close: bool = False
    ) -> None:
        super()._release(key, protocol, should_close=should_close)
        idle = self._conns.get(key)
        if idle and idle[-1][0] is protocol:  # kept for reuse (not closed)
            idle.rotate(1)


def recent_first(connector: aiohttp.BaseConnector | None) -> None:
    """Turn a plain `TCPConnector` built elsewhere (kubernetes_asyncio's, with its limit
    and TLS context) into a `RecentFirstConnector`, before it holds any connection: the
    subclass adds no state, only the order of reuse."""
    if type(connector) is not aiohttp.TCPConnector:
        raise TypeError(f"expected an aiohttp.TCPConnector, got {type(connector).__name__}")
    connector.__class__ = RecentFirstConnector
