"""The request metrics middleware counts and times every request by method, route template
and status, looking each series up once (not the labels' validation and lock per request),
and starts over when handed another app's metrics."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client.metrics import MetricWrapperBase
from starlette.types import Receive, Scope, Send

from platform_api.metrics import PlatformMetrics, RequestMetrics


class _Route:
    path = "/agentic/tasks/{namespace}/{name}/steps/{step_id}/approve"


async def _app(scope: Scope, receive: Receive, send: Send) -> None:
    scope["route"] = _Route()
    await send({"type": "http.response.start", "status": scope["answer"], "headers": []})
    await send({"type": "http.response.body", "body": b"{}"})


async def _call(middleware: RequestMetrics, answer: int) -> None:
    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(message: Any) -> None:
        return None

    await middleware({"type": "http", "method": "POST", "answer": answer}, receive, send)


def _count(metrics: PlatformMetrics, code: str) -> float:
    value = metrics.registry.get_sample_value(
        "humanwork_platform_requests_total",
        {"method": "POST", "route": _Route.path, "code": code},
    )
    return value or 0.0


async def test_each_series_is_looked_up_once_and_counts_every_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    looked_up: list[tuple[str, ...]] = []
    real = MetricWrapperBase.labels

    def counting(self: MetricWrapperBase, *values: Any, **named: Any) -> Any:
        looked_up.append(tuple(values))
        return real(self, *values, **named)

    monkeypatch.setattr(MetricWrapperBase, "labels", counting)
    metrics = PlatformMetrics()
    middleware = RequestMetrics(_app, lambda: metrics)
    for answer in (200, 200, 200, 409):
        await _call(middleware, answer)
    assert _count(metrics, "200") == 3
    assert _count(metrics, "409") == 1
    assert len(looked_up) == 4  # two series (200 and 409), each a counter and a histogram
    latency = metrics.registry.get_sample_value(
        "humanwork_platform_request_duration_seconds_count",
        {"method": "POST", "route": _Route.path},
    )
    assert latency == 4

    other = PlatformMetrics()  # another app's metrics: counted there, not in the first
    switched = [other]
    middleware.metrics = lambda: switched[0]
    await _call(middleware, 200)
    assert _count(other, "200") == 1
    assert _count(metrics, "200") == 3
