"""The agent's NetworkPolicy and scheduling on the real control plane (issue 13, item 3):
the operator discovers the API server from the `kubernetes` EndpointSlices in `default`
(under its own least-privilege ServiceAccount) and lets the agent reach exactly those
endpoints, besides DNS, the platform API's pods and its configured CIDRs; ingress comes
only from the platform API's pods; nodeSelector, tolerations and runtimeClassName of the
AgentInstance reach the agent pods (here on the kwok node; tests/node enforces policies)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from humanwork_dev.processes import OperatorProcess
from tests.agents import create_instance, wait_phase, widened_bounds
from tests.conftest import Cluster
from tests.support import eventually


def _api_server(cluster: Cluster) -> tuple[set[str], set[int]]:
    slices = client.DiscoveryV1Api(cluster.api).list_namespaced_endpoint_slice(
        "default", label_selector="kubernetes.io/service-name=kubernetes"
    )
    addresses = {a for s in slices.items for e in s.endpoints or [] for a in e.addresses}
    ports = {p.port for s in slices.items for p in s.ports or []}
    assert addresses and ports, "the API server publishes its endpoints"
    return addresses, ports


def test_the_agent_may_reach_the_api_server_it_watches_and_only_the_platform_reaches_it(
    cluster: Cluster, operator: OperatorProcess, org: tuple[str, str]
) -> None:
    ns, org_id = org
    create_instance(cluster, ns, org_id)
    wait_phase(cluster, ns, "Ready")
    policy = client.NetworkingV1Api(cluster.api).read_namespaced_network_policy("agent-agent", ns)
    doc: dict[str, Any] = client.ApiClient().sanitize_for_serialization(policy)
    addresses, ports = _api_server(cluster)
    allowed = [
        rule
        for rule in doc["spec"]["egress"]
        if {peer.get("ipBlock", {}).get("cidr") for peer in rule["to"]}
        == {f"{a}/32" for a in addresses}
    ]
    assert [{p["port"] for p in rule["ports"]} for rule in allowed] == [ports]
    # no other rule opens anything beyond DNS, the platform's pods and the LLM CIDR
    peers = [peer for rule in doc["spec"]["egress"] for peer in rule.get("to", [])]
    assert all(p.get("ipBlock", {}).get("cidr") != "0.0.0.0/0" for p in peers)
    platform = {"app.kubernetes.io/name": "humanwork-platform-api"}
    assert [p["podSelector"]["matchLabels"] for p in doc["spec"]["ingress"][0]["from"]] == [
        platform
    ]


@pytest.fixture
def runtime_class(cluster: Cluster) -> Iterator[str]:
    name = f"sandbox-{uuid.uuid4().hex[:6]}"
    node = client.NodeV1Api(cluster.api)
    node.create_runtime_class(
        client.V1RuntimeClass(metadata=client.V1ObjectMeta(name=name), handler="runc")
    )
    yield name
    node.delete_runtime_class(name)


def test_scheduling_fields_reach_the_agent_pods(
    cluster: Cluster, operator: OperatorProcess, org: tuple[str, str], runtime_class: str
) -> None:
    ns, org_id = org
    toleration = {"key": "humanwork.dev/sandbox", "operator": "Exists", "effect": "NoSchedule"}
    # the platform team allows them (the agent bounds, manifests/base/policies/params.yaml)
    with widened_bounds(
        cluster,
        agentTolerationKeys="humanwork.dev/sandbox",
        agentNodeSelectors="type=kwok",
        agentRuntimeClasses=runtime_class,
    ):
        eventually(
            lambda: create_instance(
                cluster,
                ns,
                org_id,
                nodeSelector={"type": "kwok"},
                tolerations=[toleration],
                runtimeClassName=runtime_class,
            ),
            timeout=30,
        )
        wait_phase(cluster, ns, "Ready")
        pods = (
            client.CoreV1Api(cluster.api)
            .list_namespaced_pod(ns, label_selector="app.kubernetes.io/instance=agent")
            .items
        )
    assert [p.status.phase for p in pods] == ["Running"]
    spec = pods[0].spec
    assert spec.node_selector == {"type": "kwok"}
    assert spec.runtime_class_name == runtime_class
    assert any(
        (t.key, t.operator, t.effect) == ("humanwork.dev/sandbox", "Exists", "NoSchedule")
        for t in spec.tolerations
    )
