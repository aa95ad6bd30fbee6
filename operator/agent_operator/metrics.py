"""Prometheus metrics of the operator: reconciles, their durations, token rotations,
revocations, drift repairs and errors by reason. `serve` exposes them over HTTP."""

from __future__ import annotations

from prometheus_client import Counter, Histogram, start_http_server

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
    "Requests the operator's own client sent to the API server (kopf's watches excluded).",
    ["method"],
)
ERRORS = Counter(
    "humanwork_operator_errors_total", "Failed API calls during reconciles, by reason.", ["reason"]
)


def serve(port: int, address: str = "0.0.0.0") -> None:
    """Serve /metrics on a background thread (never on the event loop)."""
    start_http_server(port, addr=address)
