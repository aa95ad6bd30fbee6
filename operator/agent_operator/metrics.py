"""Prometheus metrics of the operator: reconciles, their durations, token rotations,
revocations, drift repairs and errors by reason, whether this replica leads, and, read
when Prometheus scrapes, the AgentInstances by the phase their last reconcile reported.
`serve` exposes them over HTTP (only the leader serves: a standby runs no kopf)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client import REGISTRY, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from humanwork_core.resources import AgentInstancePhase

PHASES = tuple(p.value for p in AgentInstancePhase)
"""The `phase` label's values (an instance not reconciled yet counts as Pending)."""

RECONCILES = Counter(
    "humanwork_operator_reconciles_total",
    "AgentInstance reconciles, by what triggered them and how they ended.",
    ["trigger", "result"],
)
TASK_RECONCILES = Counter(
    "humanwork_operator_task_reconciles_total",
    "AgenticTask reconciles (deadlines, escalation, phase), by how they ended.",
    ["result"],
)
DURATION = Histogram(
    "humanwork_operator_reconcile_duration_seconds",
    "Time one AgentInstance reconcile took.",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
ROTATIONS = Counter(
    "humanwork_operator_tokens_issued_total",
    "Agent tokens issued (first issue or rotation).",
    ["reason"],
)
REVOCATIONS = Counter(
    "humanwork_operator_tokens_revoked_total", "Agent token ids recorded as revoked."
)
DRIFT = Counter(
    "humanwork_operator_children_restored_total",
    "Managed children found deleted and restored.",
    ["kind"],
)
SCALINGS = Counter(
    "humanwork_operator_scalings_total",
    "Replica changes the autoscaler wrote to an AgentInstance's scale subresource.",
)
API_REQUESTS = Counter(
    "humanwork_operator_api_requests_total",
    "Requests the operator's own client sent to the API server (kopf's watches excluded), "
    "by method and resource (with its subresource).",
    ["method", "resource"],
)
ERRORS = Counter(
    "humanwork_operator_errors_total", "Failed API calls during reconciles, by reason.", ["reason"]
)

LEADER = Gauge(
    "humanwork_operator_leader",
    "1 while this replica holds its shard's Lease and operates (a standby serves no metrics).",
)


class _Instances(Collector):
    """The AgentInstances this replica operates, by phase, read when Prometheus scrapes."""

    def __init__(self) -> None:
        self.source: Callable[[], Iterable[str]] | None = None

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "humanwork_operator_agent_instances",
            "AgentInstances by the phase their last reconcile reported (Pending, "
            "Provisioning, Ready, Degraded, Paused, Failed).",
            labels=["phase"],
        )
        counts = dict.fromkeys(PHASES, 0)
        for phase in self.source() if self.source is not None else ():
            key = phase if phase in counts else AgentInstancePhase.PENDING.value
            counts[key] += 1
        for phase, count in counts.items():
            family.add_metric([phase], count)
        yield family


INSTANCES = _Instances()
REGISTRY.register(INSTANCES)


class _OpenTasks(Collector):
    """The open AgenticTasks this replica counts, by agent (what the autoscaler scales on),
    read when Prometheus scrapes; an agent with none has no series."""

    def __init__(self) -> None:
        self.source: Callable[[], Iterable[tuple[str, str, int]]] | None = None

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "humanwork_operator_open_tasks",
            "Open (not terminal) AgenticTasks by the namespace and name of their agent.",
            labels=["namespace", "agent"],
        )
        for namespace, agent, count in self.source() if self.source is not None else ():
            family.add_metric([namespace, agent], count)
        yield family


OPEN_TASKS = _OpenTasks()
REGISTRY.register(OPEN_TASKS)


def serve(port: int, address: str = "0.0.0.0") -> None:
    """Serve /metrics on a background thread (never on the event loop)."""
    start_http_server(port, addr=address)
