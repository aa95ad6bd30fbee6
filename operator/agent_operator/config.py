"""The operator's settings: plain, immutable data injected into the builders and handlers.

Nothing here reads the environment at import time; :meth:`OperatorSettings.from_env` reads a
mapping it is given (``os.environ`` at the entry point, a dict in the tests).
"""

from __future__ import annotations

import dataclasses
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

ENV_PREFIX = "HUMANWORK_OPERATOR_"
_LABEL_VALUE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")


@dataclass(frozen=True)
class OperatorSettings:
    """Where the platform is, what the agent pods look like, and where keys are kept."""

    platform_namespace: str = "humanwork-system"
    """Namespace of the platform API (and of the operator): the only ingress source of
    agent pods, and one of their egress destinations."""
    service_account: str = "humanwork-operator"
    """The operator's own ServiceAccount (in `platform_namespace`): the subject of the
    RoleBinding it makes in each org namespace for that namespace's Secrets."""
    platform_api_service: str = "humanwork-platform-api"
    platform_api_port: int = 8000
    """The platform API's port; the Service port and the pod port are assumed equal, since a
    NetworkPolicy sees the pod port."""
    platform_api_scheme: str = "http"
    platform_ca_file: str = ""
    """PEM CA bundle the agents verify the platform's certificate with (the operator's
    mounted ConfigMap humanwork-platform-ca): copied into each agent's ConfigMap
    `<name>-platform-ca`, mounted into its pods, and re-copied within seconds of a change
    (the agents re-read it without a restart). Empty: no CA is given to the agents."""
    agent_port: int = 8080
    agent_image: str = "humanwork/agent:0.1.0"
    agent_image_pull_policy: str = "IfNotPresent"
    agent_run_as_user: int = 10001
    default_cpu_request: str = "250m"
    default_memory_request: str = "256Mi"
    default_cpu_limit: str = "500m"
    default_memory_limit: str = "512Mi"
    dns_namespace: str | None = "kube-system"
    """Namespace of the cluster DNS the agents may query on port 53; None allows port 53 to
    any destination (for node-local DNS caches)."""
    kube_api_token_seconds: int = 3600
    """Lifetime of the projected ServiceAccount token agents watch their tasks with."""
    tmp_size_limit: str = "64Mi"
    signing_keys_secret: str = "humanwork-agent-signing-keys"
    """Secret in `platform_namespace` that holds the operator's token signing keys."""
    callback_key_secret: str = "humanwork-callback-key"
    """Secret in `platform_namespace` with the master key every AgentInstance's callback
    (HMAC) secret is derived from; the platform API reads it to verify agent events."""
    jwks_config_map: str = "humanwork-agent-jwks"
    """ConfigMap in `platform_namespace` that publishes the public keys as a JWK set."""
    revocations_config_map: str = "humanwork-agent-revocations"
    """ConfigMap in `platform_namespace` listing the jtis of deleted agents' tokens (key
    `jti.<jti>`, value the token's expiry), for the platform API to refuse at once."""
    task_ttl_seconds: int = 86400
    """How long a finished AgenticTask stays once the platform API has archived it (the
    annotation humanwork.io/archived); then the operator deletes it."""
    retry_window_seconds: int = 86400
    """How long, at least, a task that failed on a step an expert may retry (its action is
    safe to retry) stays before it is deleted, whatever `task_ttl_seconds` says: the
    time experts have to retry it."""
    previous_token_grace_seconds: int = 60
    """How long the previous token stays valid after an ordinary rotation or a refresh the
    agent asked for (so the agent can re-read its Secret); none after a revocation."""
    scale_down_cooldown_seconds: int = 300
    """How long an autoscaled AgentInstance (`spec.autoscaling`) must have needed fewer pods
    before the operator scales it down (scaling up is at once): no flapping when tasks
    finish and arrive in bursts."""
    replicas_settle_seconds: int = 10
    """How long a change of an agent's pod count alone (a pod created, not yet Ready) waits
    before it is written to the AgentInstance's status, if the pod's readiness has not
    written it first (0: at once)."""
    token_issuer: str = "humanwork-operator"
    token_audience: str = "humanwork-platform"

    shard: str = ""
    """The org namespaces this operator serves: those labelled `humanwork.io/shard=<shard>`;
    empty serves the org namespaces without that label (an install with one shard)."""
    lease_name: str = "humanwork-operator"
    """The Lease (in `platform_namespace`) the replicas of a shard compete for, one active at
    a time; `-<shard>` is appended for a named shard. Empty: no leader election (then run
    one replica only)."""
    identity: str = ""
    """This replica's name in the Lease; empty: the host name (a pod's name), so a restarted
    container takes its own Lease back at once. Replicas on one host need their own."""
    lease_duration_seconds: int = 15
    """How long a standby waits, from the last renewal it observed, before it takes over a
    Lease: a killed leader is replaced within this plus `lease_retry_seconds`."""
    lease_renew_deadline_seconds: int = 10
    """How long the leader keeps acting without renewing before it stops and exits (less
    than the duration, so it has stopped before a standby may take over)."""
    lease_retry_seconds: int = 2
    """How often the leader renews and a standby tries."""

    # --- the agents' metrics --------------------------------------------------------------
    agent_metrics_port: int = 0
    """Port of the agents' Prometheus `/metrics` (the container port `metrics`, given to the
    agent as `HUMANWORK_AGENT_METRICS_PORT`); 0: the agents serve no metrics."""
    agent_metrics_namespaces: str = ""
    """Label selector (`key=value,...`) of the namespaces whose pods may scrape the agents'
    metrics port (e.g. `kubernetes.io/metadata.name=monitoring`); empty: nobody (the
    NetworkPolicy opens the port to no one)."""
    agent_metrics_pods: str = ""
    """Label selector (`key=value,...`) of the scraping pods in those namespaces (e.g.
    `app.kubernetes.io/name=prometheus`); empty: any pod of those namespaces."""

    # --- the agents' traces -----------------------------------------------------------------
    agent_traces_endpoint: str = ""
    """OTLP/HTTP endpoint the agents export their traces to (given to the agent as
    `OTEL_EXPORTER_OTLP_ENDPOINT`, e.g. `http://otel-collector.monitoring:4318`); empty: the
    agents export none. The agent is untrusted: whatever it sends reaches this collector."""
    agent_traces_namespaces: str = ""
    """Label selector (`key=value,...`) of the namespaces of the collector the agents' egress
    may reach on the endpoint's port (required with an endpoint)."""
    agent_traces_pods: str = ""
    """Label selector of the collector's pods in those namespaces; empty: any pod there."""

    # --- the agents' tool path ----------------------------------------------------------------
    agent_tool_path: str = "native"
    """How the agents call their tools (given to the agent as `HUMANWORK_TOOL_PATH`):
    `native`, the tool proxy's endpoint, or `mcp`, the platform's MCP endpoint."""

    def __post_init__(self) -> None:
        if self.shard and not _LABEL_VALUE.fullmatch(self.shard):
            raise ValueError(f"{ENV_PREFIX}SHARD must be a label value, not {self.shard!r}")
        if not 0 < self.lease_retry_seconds < self.lease_renew_deadline_seconds:
            raise ValueError("the lease retry must be positive and below the renew deadline")
        if self.lease_renew_deadline_seconds >= self.lease_duration_seconds:
            raise ValueError("the lease renew deadline must be below the lease duration")
        self._check_metrics()
        self._check_traces()
        if self.agent_tool_path not in TOOL_PATHS:
            raise ValueError(f"{ENV_PREFIX}AGENT_TOOL_PATH must be one of {', '.join(TOOL_PATHS)}")

    def _check_metrics(self) -> None:
        """The agents' metrics port is a port apart from theirs; the selectors parse."""
        if not 0 <= self.agent_metrics_port <= 65535:
            raise ValueError(f"{ENV_PREFIX}AGENT_METRICS_PORT must be a port (0: off)")
        if self.agent_metrics_port and self.agent_metrics_port == self.agent_port:
            raise ValueError(f"{ENV_PREFIX}AGENT_METRICS_PORT must differ from the agent port")
        if self.agent_metrics_pods and not self.agent_metrics_namespaces:
            raise ValueError(f"{ENV_PREFIX}AGENT_METRICS_PODS needs AGENT_METRICS_NAMESPACES")
        match_labels(self.agent_metrics_namespaces, "AGENT_METRICS_NAMESPACES")
        match_labels(self.agent_metrics_pods, "AGENT_METRICS_PODS")

    def _check_traces(self) -> None:
        """An endpoint is an http(s) URL with a host, and names where its collector runs."""
        match_labels(self.agent_traces_namespaces, "AGENT_TRACES_NAMESPACES")
        match_labels(self.agent_traces_pods, "AGENT_TRACES_PODS")
        if not self.agent_traces_endpoint:
            return
        if traces_port(self.agent_traces_endpoint) is None:
            raise ValueError(
                f"{ENV_PREFIX}AGENT_TRACES_ENDPOINT must be an http(s) URL with a host, not "
                f"{self.agent_traces_endpoint!r}"
            )
        if not self.agent_traces_namespaces:
            raise ValueError(f"{ENV_PREFIX}AGENT_TRACES_ENDPOINT needs AGENT_TRACES_NAMESPACES")

    @property
    def replica(self) -> str:
        """This replica's name: `identity`, else the host name."""
        return self.identity or socket.gethostname()

    @property
    def lease(self) -> str:
        """The Lease's name for this shard ("" without leader election)."""
        if not self.lease_name:
            return ""
        return f"{self.lease_name}-{self.shard}" if self.shard else self.lease_name

    @property
    def platform_api_url(self) -> str:
        """In-cluster base URL of the platform API."""
        return (
            f"{self.platform_api_scheme}://{self.platform_api_service}."
            f"{self.platform_namespace}.svc:{self.platform_api_port}"
        )

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> OperatorSettings:
        """Settings overridden by `HUMANWORK_OPERATOR_<FIELD NAME IN CAPITALS>` variables;
        an empty `..._DNS_NAMESPACE` means any destination."""
        values: dict[str, object] = {}
        for field in dataclasses.fields(cls):
            variable = ENV_PREFIX + field.name.upper()
            raw = environ.get(variable)
            if raw is None:
                continue
            default = getattr(cls, field.name)
            if isinstance(default, int):
                try:
                    values[field.name] = int(raw)
                except ValueError as exc:
                    raise ValueError(
                        f"{ENV_PREFIX}{field.name.upper()} must be an integer"
                    ) from exc
            elif field.name == "dns_namespace":
                values[field.name] = raw or None
            else:
                values[field.name] = raw
        return cls(**values)  # type: ignore[arg-type]


TOOL_PATHS = ("native", "mcp")
"""The agents' tool paths (`agent_tool_path`)."""

_LABEL_KEY = re.compile(
    r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
)


def match_labels(selector: str, setting: str = "selector") -> dict[str, str]:
    """`key=value,key2=value2` as a selector's `matchLabels`; ValueError naming `setting`
    for anything else (an empty string is no labels)."""
    labels: dict[str, str] = {}
    for term in (t.strip() for t in selector.split(",") if t.strip()):
        key, sep, value = (part.strip() for part in term.partition("="))
        if not sep or not _LABEL_KEY.fullmatch(key) or len(key) > 316:
            raise ValueError(f"{ENV_PREFIX}{setting}: {term!r} is not key=value")
        if value and not _LABEL_VALUE.fullmatch(value):
            raise ValueError(f"{ENV_PREFIX}{setting}: {value!r} is not a label value")
        labels[key] = value
    return labels


def traces_port(endpoint: str) -> int | None:
    """The TCP port of an OTLP/HTTP endpoint URL (its scheme's default when none is named);
    None when it is not an http(s) URL with a host."""
    try:
        parts = urlsplit(endpoint)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return port or (443 if parts.scheme == "https" else 80)
