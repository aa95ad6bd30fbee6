"""A Prometheus registry of one component's own, served on a port of its own.

The agent's metrics (`agent_image.metrics.AgentMetrics`) and the platform's
(`platform_api.metrics.PlatformMetrics`) each keep their series in a registry of their
own (so several apps in one process keep apart) and expose it on a port apart from the API
they serve, from a background thread (never on the event loop).
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, start_http_server


class OwnRegistry:
    """A registry and the `/metrics` server that exposes it."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._server: Any = None

    def serve(self, port: int, address: str) -> None:
        """Serve /metrics on a background thread (never on the event loop)."""
        self._server, _thread = start_http_server(port, addr=address, registry=self.registry)

    def close(self) -> None:
        """Stop serving /metrics."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
