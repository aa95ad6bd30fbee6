"""The agent's NetworkPolicy as the operator builds it, enforced on the real node (issue
13, item 3): from an agent pod, the API server (through the `kubernetes` Service, as the
agent's client reaches it) and the platform API's pods answer; another org's agent does
not. Into the agent, the platform API's pods come in; another org's pod does not. Every
refusal has a positive control: the same target reached before the policy, or from a pod
that no policy confines."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Callable
from typing import Any

from agent_operator import builders
from agent_operator.config import OperatorSettings
from humanwork_core.resources import AgentInstance
from tests.agents import instance_manifest
from tests.conftest import Cluster
from tests.node.conftest import connects, container_pid, eventually, pod_manifest

AGENT_IMAGE = "humanwork/agent:0.1.0"
PAUSE = "registry.k8s.io/pause:3.10"


def _serving(name: str, port: int, labels: dict[str, str]) -> dict[str, Any]:
    command = ["python", "-m", "http.server", str(port), "--bind", "0.0.0.0"]
    manifest = pod_manifest(name, AGENT_IMAGE, command, labels=labels)
    manifest["spec"]["containers"][0]["readinessProbe"] = {
        "tcpSocket": {"port": port},
        "periodSeconds": 1,
    }
    return manifest


def test_the_operators_policy_lets_the_agent_reach_what_it_needs_and_nothing_else(
    cluster: Cluster,
    real_node: dict[str, Any],
    restricted_namespace: Callable[[str], str],
    run_pod: Callable[..., dict[str, Any]],
) -> None:
    platform_ns, org_ns, other_ns = (restricted_namespace(p) for p in ("plat", "org", "other"))
    settings = OperatorSettings(
        platform_namespace=platform_ns, platform_api_port=8000, dns_namespace=None
    )
    wire = instance_manifest(org_ns, str(uuid.uuid4()))
    wire["metadata"]["uid"] = str(uuid.uuid4())
    instance = AgentInstance.from_wire(wire)
    agent_labels = builders.selector_labels(instance)

    platform = run_pod(platform_ns, _serving("platform", 8000, builders.PLATFORM_POD_LABELS))
    agent = run_pod(org_ns, _serving("agent", 8080, dict(agent_labels)))
    other = run_pod(other_ns, _serving("other-agent", 8080, {"app": "other-agent"}))
    # a pod of the platform namespace that is not the platform API (a database, the operator)
    database = run_pod(platform_ns, _serving("database", 5432, {"app": "database"}))
    outsider = run_pod(other_ns, pod_manifest("outsider", PAUSE))
    agent_pid, outsider_pid = container_pid(agent), container_pid(outsider)
    platform_pid = container_pid(platform)
    agent_ip, other_ip = agent["status"]["podIP"], other["status"]["podIP"]
    database_ip = database["status"]["podIP"]

    # positive controls before any policy: everything is open both ways
    assert connects(agent_pid, other_ip, 8080)
    assert connects(agent_pid, database_ip, 5432)
    assert connects(outsider_pid, agent_ip, 8080)

    slices = json.loads(
        cluster.kubectl(
            "-n", "default", "get", "endpointslices",
            "-l", "kubernetes.io/service-name=kubernetes", "-o", "json",
        ).stdout
    )["items"]  # fmt: skip
    endpoints = builders.api_server_endpoints(slices)
    assert endpoints, "the API server publishes its endpoints"
    policy = builders.network_policy(instance, settings, endpoints)
    del policy["metadata"]["ownerReferences"]  # no AgentInstance here: the GC would delete it
    cluster.kubectl("-n", org_ns, "apply", "-f", "-", stdin=json.dumps(policy))

    assert eventually(lambda: not connects(agent_pid, other_ip, 8080, timeout=1)), (
        "another org's agent still reachable from the agent"
    )
    assert eventually(lambda: not connects(outsider_pid, agent_ip, 8080, timeout=1)), (
        "another org's pod still reaches the agent"
    )
    assert eventually(lambda: not connects(agent_pid, database_ip, 5432, timeout=1)), (
        "a non-platform pod of the platform namespace still reachable from the agent"
    )
    # what the policy allows still answers
    assert connects(agent_pid, "10.96.0.1", 443), "the API server, through its Service"
    assert connects(agent_pid, platform["status"]["podIP"], 8000), "the platform API"
    assert connects(platform_pid, agent_ip, 8080), "the platform reaches the agent"
    # and the refused target is still up: reached from a pod no policy confines
    assert connects(outsider_pid, other_ip, 8080)
    assert connects(platform_pid, database_ip, 5432)
    # cluster DNS answers the agent (a UDP query to the node's CoreDNS)
    assert resolves(agent_pid, "10.213.0.1", "kubernetes.default.svc.cluster.local") == "10.96.0.1"


def resolves(pid: int, server: str, name: str) -> str | None:
    """The A record `server` gives for `name`, asked from the network namespace of `pid`."""
    code = (
        "import socket, struct, sys\n"
        f"name = {name!r}\n"
        "q = struct.pack('>HHHHHH', 0x1234, 0x0100, 1, 0, 0, 0)\n"
        "q += b''.join(bytes([len(p)]) + p.encode() for p in name.split('.')) + b'\\0'\n"
        "q += struct.pack('>HH', 1, 1)\n"
        "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3)\n"
        f"s.sendto(q, ({server!r}, 53))\n"
        "r = s.recv(512)\n"
        "print('.'.join(str(b) for b in r[-4:]) if struct.unpack('>H', r[6:8])[0] else '')\n"
    )
    done = subprocess.run(
        ["nsenter", "-t", str(pid), "-n", sys.executable, "-c", code],
        capture_output=True, text=True, check=False, timeout=15,
    )  # fmt: skip
    return done.stdout.strip() or None


def test_the_agents_metrics_port_answers_the_named_scrapers_and_nobody_else(
    cluster: Cluster,
    real_node: dict[str, Any],
    restricted_namespace: Callable[[str], str],
    run_pod: Callable[..., dict[str, Any]],
) -> None:
    """Issue 17: with HUMANWORK_OPERATOR_AGENT_METRICS_PORT and _NAMESPACES set, the
    operator's policy opens the agent's metrics port to pods of the named namespaces only,
    and only that port; the platform API (which may reach the command port) and another
    namespace's pod may not scrape. Positive controls: every probe answered before."""
    platform_ns, org_ns, monitoring_ns, other_ns = (
        restricted_namespace(p) for p in ("plat", "org", "mon", "other")
    )
    cluster.kubectl("label", "namespace", monitoring_ns, "humanwork.test/scrapers=yes")
    settings = OperatorSettings(
        platform_namespace=platform_ns,
        platform_api_port=8000,
        dns_namespace=None,
        agent_metrics_port=9100,
        agent_metrics_namespaces="humanwork.test/scrapers=yes",
    )
    wire = instance_manifest(org_ns, str(uuid.uuid4()))
    wire["metadata"]["uid"] = str(uuid.uuid4())
    instance = AgentInstance.from_wire(wire)
    agent_labels = dict(builders.selector_labels(instance))
    # the agent's two ports, each served by a pod of the agent's labels
    command = run_pod(org_ns, _serving("agent", 8080, agent_labels))["status"]["podIP"]
    metrics = run_pod(org_ns, _serving("agent-metrics", 9100, agent_labels))["status"]["podIP"]
    platform = container_pid(
        run_pod(platform_ns, _serving("platform", 8000, builders.PLATFORM_POD_LABELS))
    )
    scraper = container_pid(run_pod(monitoring_ns, pod_manifest("scraper", PAUSE)))
    outsider = container_pid(run_pod(other_ns, pod_manifest("outsider", PAUSE)))
    for pid in (platform, scraper, outsider):
        assert connects(pid, metrics, 9100) and connects(pid, command, 8080)

    policy = builders.network_policy(instance, settings, [])
    del policy["metadata"]["ownerReferences"]
    cluster.kubectl("-n", org_ns, "apply", "-f", "-", stdin=json.dumps(policy))

    assert eventually(lambda: not connects(outsider, metrics, 9100, timeout=1)), (
        "another namespace's pod still scrapes the agent"
    )
    assert eventually(lambda: not connects(platform, metrics, 9100, timeout=1)), (
        "the platform API reaches the metrics port"
    )
    assert not connects(scraper, command, 8080, timeout=1), "a scraper reaches the command port"
    assert connects(scraper, metrics, 9100), "the named scrapers scrape"
    assert connects(platform, command, 8080), "the platform still commands the agent"
