"""Prometheus metrics of the platform API, on a port of their own.

Requests by route template, method and status code with a latency histogram (an ASGI
middleware: `RequestMetrics`), decisions by verdict and outcome, tool-proxy calls by tool
and outcome, webhook deliveries by outcome, whether the database was restored to an
older point than its audit checkpoints, and, read at scrape time from the review
queue's index, the open decisions, the nearest deadline and when the oldest was created.
Each app has a registry of its own (so several apps in one process keep apart); `serve`
exposes it on `HUMANWORK_METRICS_PORT` (0: off), never on the API's own port, which the
experts' Ingress reaches. The names follow the operator's (`agent_operator.metrics`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from humanwork_core.metrics import OwnRegistry

QueueSummary = Callable[[datetime], tuple[int, datetime | None, datetime | None]]
"""The open decisions at a time, the nearest deadline and the oldest decision's creation
(`DecisionIndex.summary`)."""


class _Queue(Collector):
    """The review queue's depth and nearest deadline, read when Prometheus scrapes."""

    def __init__(self, source: QueueSummary | None = None) -> None:
        self.source = source

    def collect(self) -> Iterator[GaugeMetricFamily]:
        depth = GaugeMetricFamily(
            "humanwork_platform_open_decisions", "Decisions waiting for an expert."
        )
        nearest = GaugeMetricFamily(
            "humanwork_platform_nearest_deadline_timestamp_seconds",
            "Unix time of the nearest deadline among the open decisions (absent: none).",
        )
        oldest = GaugeMetricFamily(
            "humanwork_platform_oldest_open_decision_timestamp_seconds",
            "Unix time the oldest open decision's task was created (absent: none open).",
        )
        if self.source is not None:
            count, deadline, created = self.source(datetime.now(UTC))
            depth.add_metric([], count)
            if deadline is not None:
                nearest.add_metric([], deadline.timestamp())
            if created is not None:
                oldest.add_metric([], created.timestamp())
        yield depth
        yield nearest
        yield oldest


class PlatformMetrics(OwnRegistry):
    """One app's metrics; `queue_source` (the decision index's summary, when there is
    one) feeds the review queue's gauges."""

    def __init__(self, queue_source: QueueSummary | None = None) -> None:
        super().__init__()
        self.requests = Counter(
            "humanwork_platform_requests_total",
            "HTTP requests answered, by method, route template and status code.",
            ["method", "route", "code"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "humanwork_platform_request_duration_seconds",
            "Time to answer an HTTP request, by method and route template.",
            ["method", "route"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=self.registry,
        )
        self.decisions = Counter(
            "humanwork_platform_decisions_total",
            "Experts' decisions on steps, by verdict.",
            ["verdict"],
            registry=self.registry,
        )
        self.proxy_calls = Counter(
            "humanwork_platform_proxy_calls_total",
            "Tool-proxy calls of agents, by tool and outcome.",
            ["tool", "outcome"],
            registry=self.registry,
        )
        self.webhook_deliveries = Counter(
            "humanwork_platform_webhook_deliveries_total",
            "Outgoing webhook delivery attempts, by outcome.",
            ["outcome"],
            registry=self.registry,
        )
        self.restored_behind = Gauge(
            "humanwork_platform_restored_behind",
            "1 when the database was last restored to a point older than its signed audit "
            "checkpoints (records after the backup are gone); set by /healthz.",
            registry=self.registry,
        )
        self.queue = _Queue(queue_source)
        self.registry.register(self.queue)


def _route(scope: Scope) -> str:
    """The matched route's template (`/orgs/{org_id}`), never the raw path: raw paths
    would make one series per id."""
    route: Any = scope.get("route")
    path = getattr(route, "path", None)
    return str(path) if path else "unmatched"


class RequestMetrics:
    """ASGI middleware counting and timing each HTTP request (a streamed answer is timed
    to its status line)."""

    def __init__(self, app: ASGIApp, metrics: Callable[[], PlatformMetrics | None]) -> None:
        self.app = app
        self.metrics = metrics
        self._series: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}
        """The counter's and the histogram's series of each method, route template and
        status seen, looked up once (the labels' validation and lock, not per request);
        bounded by the routes: a route template, never a raw path."""
        self._of: PlatformMetrics | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = [500]

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            metrics = self.metrics()
            if metrics is not None:
                count, latency = self._series_of(metrics, scope["method"], _route(scope), status[0])
                count.inc()
                latency.observe(time.perf_counter() - started)

    def _series_of(
        self, metrics: PlatformMetrics, method: str, route: str, code: int
    ) -> tuple[Counter, Histogram]:
        if metrics is not self._of:  # another app's metrics (tests build several): start over
            self._of, self._series = metrics, {}
        key = (method, route, code)
        found = self._series.get(key)
        if found is None:
            found = (
                metrics.requests.labels(method, route, str(code)),
                metrics.latency.labels(method, route),
            )
            self._series[key] = found
        return found
