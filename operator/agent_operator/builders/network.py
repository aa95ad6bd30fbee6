"""The agent's NetworkPolicy: ingress only from the platform API's pods (and, on the
metrics port alone, from the scrapers the operator's settings name), egress only to DNS,
the platform API, the API server's endpoints, the configured CIDRs and (when the agents
export traces) the collector's pods on the endpoint's port."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from humanwork_core.resources import (
    AgentInstance,
)

from ..config import OperatorSettings, match_labels, traces_port
from .naming import (
    Manifest,
    _metadata,
    agent_name,
    selector_labels,
)


def _egress_rules(instance: AgentInstance, settings: OperatorSettings) -> list[dict[str, Any]]:
    dns_ports = [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]
    dns: dict[str, Any] = {"ports": dns_ports}
    if settings.dns_namespace is not None:
        dns["to"] = [
            {
                "namespaceSelector": {
                    "matchLabels": {"kubernetes.io/metadata.name": settings.dns_namespace}
                }
            }
        ]
    rules: list[dict[str, Any]] = [
        dns,
        {
            "to": [_platform_pods(settings)],
            "ports": [{"protocol": "TCP", "port": settings.platform_api_port}],
        },
    ]
    rules += traces_egress(settings)
    egress = instance.spec.egress
    for cidr in egress.llm_cidrs:
        rules.append({"to": [{"ipBlock": {"cidr": cidr}}], "ports": [_tcp(443)]})
    for extra in egress.extra:
        rules.append(
            {"to": [{"ipBlock": {"cidr": extra.cidr}}], "ports": [_tcp(p) for p in extra.ports]}
        )
    return rules


def _tcp(port: int) -> dict[str, Any]:
    return {"protocol": "TCP", "port": port}


PLATFORM_POD_LABELS = {"app.kubernetes.io/name": "humanwork-platform-api"}
"""The labels of the platform API's pods (manifests/base/platform): the only pods that may
reach an agent, and the only ones of the platform namespace an agent may reach."""


ApiServerEndpoint = tuple[str, int]


def api_server_endpoints(slices: Iterable[Mapping[str, Any]]) -> list[ApiServerEndpoint]:
    """(address, port) of the API server, from the EndpointSlices of the `kubernetes`
    Service in `default` (what the agent's connection to kubernetes.default reaches once
    the Service address is translated, which is what a NetworkPolicy sees)."""
    found: set[ApiServerEndpoint] = set()
    for eps in slices:
        ports = [
            int(p["port"])
            for p in eps.get("ports") or []
            if p.get("port") and p.get("protocol", "TCP") == "TCP"
        ]
        for endpoint in eps.get("endpoints") or []:
            if (endpoint.get("conditions") or {}).get("ready") is False:
                continue
            found.update((addr, port) for addr in endpoint.get("addresses") or [] for port in ports)
    return sorted(found)


def _api_server_rule(endpoints: Sequence[ApiServerEndpoint]) -> list[dict[str, Any]]:
    if not endpoints:
        return []
    addresses = sorted({addr for addr, _ in endpoints})
    ports = sorted({port for _, port in endpoints})
    return [
        {
            "to": [{"ipBlock": {"cidr": f"{a}/128" if ":" in a else f"{a}/32"}} for a in addresses],
            "ports": [_tcp(p) for p in ports],
        }
    ]


def network_policy(
    instance: AgentInstance,
    settings: OperatorSettings,
    api_server: Sequence[ApiServerEndpoint] = (),
) -> Manifest:
    """Default deny for the agent pods, except: ingress from the platform API's pods on the
    agent port (and from the scrapers on the metrics port, see `metrics_ingress`); egress
    to DNS, the platform API's pods, the API server's endpoints (`api_server`, to watch the
    agent's AgenticTasks) and the CIDRs of `spec.egress`."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _metadata(instance, agent_name(instance)),
        "spec": {
            "podSelector": {"matchLabels": selector_labels(instance)},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [
                {"from": [_platform_pods(settings)], "ports": [_tcp(settings.agent_port)]},
                *metrics_ingress(settings),
            ],
            "egress": _egress_rules(instance, settings) + _api_server_rule(api_server),
        },
    }


def _platform_pods(settings: OperatorSettings) -> dict[str, Any]:
    return {
        "namespaceSelector": {
            "matchLabels": {"kubernetes.io/metadata.name": settings.platform_namespace}
        },
        "podSelector": {"matchLabels": dict(PLATFORM_POD_LABELS)},
    }


# --- the agent's metrics ------------------------------------------------------------------


def metrics_ingress(settings: OperatorSettings) -> list[dict[str, Any]]:
    """The rule letting the scrapers (pods matching `agent_metrics_pods` in namespaces
    matching `agent_metrics_namespaces`) reach the metrics port, and only that port; none
    when the agents serve no metrics or no namespaces are named (then nobody may)."""
    namespaces = match_labels(settings.agent_metrics_namespaces)
    if not settings.agent_metrics_port or not namespaces:
        return []
    peer: dict[str, Any] = {"namespaceSelector": {"matchLabels": namespaces}}
    pods = match_labels(settings.agent_metrics_pods)
    if pods:
        peer["podSelector"] = {"matchLabels": pods}
    return [{"from": [peer], "ports": [_tcp(settings.agent_metrics_port)]}]


def traces_egress(settings: OperatorSettings) -> list[dict[str, Any]]:
    """The rule letting the agents reach the trace collector (pods matching
    `agent_traces_pods` in namespaces matching `agent_traces_namespaces`) on the endpoint's
    port, and nothing else of theirs; none when the agents export no traces."""
    port = traces_port(settings.agent_traces_endpoint) if settings.agent_traces_endpoint else None
    namespaces = match_labels(settings.agent_traces_namespaces)
    if port is None or not namespaces:
        return []
    peer: dict[str, Any] = {"namespaceSelector": {"matchLabels": namespaces}}
    pods = match_labels(settings.agent_traces_pods)
    if pods:
        peer["podSelector"] = {"matchLabels": pods}
    return [{"to": [peer], "ports": [_tcp(port)]}]
