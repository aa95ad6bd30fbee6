"""The review queue's gauges move with the queue: the open decisions, the nearest deadline
and when the oldest open decision was created (the stuck-approval alert's input), read
from the platform's DecisionIndex when Prometheus scrapes."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from prometheus_client import generate_latest

from platform_api.human_tasks.index import DecisionIndex
from platform_api.metrics import PlatformMetrics
from tests.unit.test_agent_metrics import parse, value
from tests.unit.test_queue_memory import _raw

OLDEST = "humanwork_platform_oldest_open_decision_timestamp_seconds"
OPEN = "humanwork_platform_open_decisions"


def created(name: str, minutes: int, at: str) -> dict[str, Any]:
    raw = _raw(name, minutes)
    raw["metadata"]["creationTimestamp"] = at
    return raw


def stamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_the_oldest_open_decision_moves_with_the_queue() -> None:
    index = DecisionIndex()
    metrics = PlatformMetrics(queue_source=index.summary)
    samples = parse(generate_latest(metrics.registry).decode())
    assert value(samples, OPEN) == 0
    assert not [key for key in samples if key[0] == OLDEST]  # nothing open: no sample
    old, new = "2026-12-01T06:00:00Z", "2026-12-01T07:30:00Z"
    # deadlines far in the future: none passes while the test reads the queue
    index.replace([created("first", 10**8, old), created("second", 10**8, new)])
    samples = parse(generate_latest(metrics.registry).decode())
    assert value(samples, OPEN) == 2
    assert value(samples, OLDEST) == stamp(old)
    index.forget(created("first", 10**8, old))  # decided: it leaves the queue
    samples = parse(generate_latest(metrics.registry).decode())
    assert value(samples, OPEN) == 1
    assert value(samples, OLDEST) == stamp(new)
