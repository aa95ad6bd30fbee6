"""The agents' metrics port on the real control plane (issue 17, item 4, "and on the agent").

The session's operator runs with `HUMANWORK_OPERATOR_AGENT_METRICS_PORT` and the scrapers'
selectors (tests/fixtures/stack.py). What the API server holds after a reconcile: the
agent's pod declares the `metrics` port and is told it; the NetworkPolicy admits the
configured scrapers (pods `app.kubernetes.io/name=prometheus` in the namespace
`monitoring`) on that port only, and the platform on the command port only. Who may change
that: neither the agent (its ServiceAccount may not touch NetworkPolicies) nor the org
(an AgentInstance cannot carry a metrics rule: the API server prunes it). Traffic itself
is enforced only on a real node (tests/node, not run here)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from humanwork_dev.processes import OperatorProcess
from tests.agents import create_instance, wait_phase
from tests.conftest import Cluster
from tests.fixtures.stack import AGENT_METRICS_PORT
from tests.support import service_account_token

MONITORING = {"kubernetes.io/metadata.name": "monitoring"}
PROMETHEUS = {"app.kubernetes.io/name": "prometheus"}
PLATFORM = {"app.kubernetes.io/name": "humanwork-platform-api"}


def _policy(cluster: Cluster, ns: str) -> dict[str, Any]:
    policy = client.NetworkingV1Api(cluster.api).read_namespaced_network_policy("agent-agent", ns)
    doc: dict[str, Any] = client.ApiClient().sanitize_for_serialization(policy)
    return doc


def _ports(rule: dict[str, Any]) -> set[int]:
    return {int(p["port"]) for p in rule.get("ports") or []}


def test_the_metrics_port_is_declared_and_open_to_the_scrapers_only(
    cluster: Cluster, operator: OperatorProcess, org: tuple[str, str]
) -> None:
    ns, org_id = org
    # the org asks for a metrics rule of its own in the AgentInstance: nothing takes it
    create_instance(
        cluster,
        ns,
        org_id,
        metrics={"port": 80, "from": [{"namespaceSelector": {}}]},
        networkPolicy={"ingress": [{}]},
    )
    wait_phase(cluster, ns, "Ready")
    deployment = client.AppsV1Api(cluster.api).read_namespaced_deployment("agent-agent", ns)
    (container,) = deployment.spec.template.spec.containers
    assert [(p.name, p.container_port) for p in container.ports] == [
        ("http", 8080),
        ("metrics", AGENT_METRICS_PORT),
    ]
    env = {e.name: e.value for e in container.env}
    assert env["HUMANWORK_AGENT_METRICS_PORT"] == str(AGENT_METRICS_PORT)

    ingress = _policy(cluster, ns)["spec"]["ingress"]
    assert len(ingress) == 2, ingress
    platform, scrapers = ingress
    assert [p["podSelector"]["matchLabels"] for p in platform["from"]] == [PLATFORM]
    assert _ports(platform) == {8080}
    assert scrapers["from"] == [
        {
            "namespaceSelector": {"matchLabels": MONITORING},
            "podSelector": {"matchLabels": PROMETHEUS},
        }
    ]
    assert _ports(scrapers) == {AGENT_METRICS_PORT}
    # no rule admits everyone: every peer names its namespace by label
    for rule in ingress:
        for peer in rule["from"]:
            assert peer["namespaceSelector"]["matchLabels"], rule
    stored = client.CustomObjectsApi(cluster.api).get_namespaced_custom_object(
        "humanwork.io", "v1alpha1", ns, "agentinstances", "agent"
    )
    assert "metrics" not in stored["spec"] and "networkPolicy" not in stored["spec"]


def test_the_agent_cannot_open_its_own_metrics_port_to_anyone_else(
    cluster: Cluster, operator: OperatorProcess, org: tuple[str, str]
) -> None:
    ns, org_id = org
    create_instance(cluster, ns, org_id)
    wait_phase(cluster, ns, "Ready")
    as_agent = client.NetworkingV1Api(
        cluster.client_for_token(service_account_token(cluster.api, ns, "agent-agent"))
    )
    everyone = {"spec": {"ingress": [{"ports": [{"port": AGENT_METRICS_PORT}]}]}}
    own = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "open-metrics"},
        "spec": {"podSelector": {}, "ingress": [{}], "policyTypes": ["Ingress"]},
    }
    attempts: list[Callable[[], Any]] = [
        lambda: as_agent.patch_namespaced_network_policy("agent-agent", ns, everyone),
        lambda: as_agent.create_namespaced_network_policy(ns, own),
        lambda: as_agent.delete_namespaced_network_policy("agent-agent", ns),
    ]
    for attempt in attempts:
        with pytest.raises(client.ApiException) as refused:
            attempt()
        assert refused.value.status == 403
    scrapers = _policy(cluster, ns)["spec"]["ingress"][1]
    assert scrapers["from"][0]["namespaceSelector"]["matchLabels"] == MONITORING
