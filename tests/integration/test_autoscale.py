"""Autoscaling on the real control plane (issue 15, item 3): the operator, under its own
ServiceAccount with the admission policies on, scales an AgentInstance with its open
AgenticTasks through the scale subresource, within the bounds, tells why in `Scaled`
Events, and scales down only after the tasks end and the cooldown passes."""

from __future__ import annotations

import time
from typing import Any

from kubernetes import client

from humanwork_core import taskflow
from humanwork_core.resources import Verdict
from humanwork_dev.processes import PLATFORM_NS, OperatorProcess
from tests.agents import create_instance, get_instance, wait_phase
from tests.conftest import Cluster
from tests.fixtures.stack import SCALE_DOWN_COOLDOWN_SECONDS
from tests.integration.test_tasks import Writer, approve, create_task, task_manifest, wait_task
from tests.support import eventually

BOUNDS = {"minReplicas": 1, "maxReplicas": 3, "openTasksPerReplica": 2}
OPEN = "humanwork_operator_open_tasks"


def scaled_events(cluster: Cluster, ns: str) -> list[str]:
    listed = client.CoreV1Api(cluster.api).list_namespaced_event(
        ns, field_selector="involvedObject.kind=AgentInstance,reason=Scaled"
    )
    return [str(e.message) for e in listed.items]


def replicas(cluster: Cluster, ns: str) -> tuple[int, int]:
    """(spec.replicas of the AgentInstance, spec.replicas of its Deployment)."""
    deployment = client.AppsV1Api(cluster.api).read_namespaced_deployment("agent-agent", ns)
    return int(get_instance(cluster, ns)["spec"]["replicas"]), int(deployment.spec.replicas)


def scale_of(cluster: Cluster, ns: str) -> dict[str, Any]:
    scale: Any = client.CustomObjectsApi(cluster.api).get_namespaced_custom_object_scale(
        "humanwork.io", "v1alpha1", ns, "agentinstances", "agent"
    )
    return dict(scale)


def test_an_agent_scales_with_its_open_tasks_within_bounds_and_cools_down(
    cluster: Cluster, operator: OperatorProcess, org: tuple[str, str]
) -> None:
    ns, org_id = org
    create_instance(cluster, ns, org_id, autoscaling=BOUNDS)
    wait_phase(cluster, ns, "Ready")
    assert replicas(cluster, ns) == (1, 1)

    # 7 open tasks at 2 per replica ask for 4 pods: the operator stops at maxReplicas
    names = [create_task(cluster, task_manifest(ns, org_id)) for _ in range(7)]
    assert eventually(lambda: replicas(cluster, ns) == (3, 3), timeout=30)
    assert scale_of(cluster, ns)["spec"]["replicas"] == 3
    assert scale_of(cluster, ns)["status"]["selector"]
    # the tasks arrive one by one: it scales as they are counted, each step told
    up = scaled_events(cluster, ns)
    assert up and all(m.endswith("2 per replica, bounds 1..3") for m in up), up
    assert any(m.startswith("scaled from ") and " to 3: " in m for m in up), up
    # the write went through the scale subresource, as the operator's own field manager
    managed = get_instance(cluster, ns)["metadata"]["managedFields"]
    assert any(
        m["manager"] == "humanwork-operator" and m.get("subresource") == "scale" for m in managed
    )
    # the operator counted all 7 (its own gauge), and still holds at max
    assert eventually(lambda: operator.metric(OPEN, namespace=ns, agent="agent") == 7, timeout=30)
    assert replicas(cluster, ns)[0] == 3  # never above max

    # the experts reject every plan: the tasks end, and only after the cooldown ...
    platform = Writer(cluster, PLATFORM_NS, "humanwork-platform-api", taskflow.Writer.PLATFORM_API)
    for name in names:
        task = wait_task(cluster, ns, name, lambda t: t.current_status().phase is not None)
        approve(platform, task, "read", Verdict.REJECT)
    for name in names:
        wait_task(cluster, ns, name, lambda t: t.current_status().phase == "Rejected")
    ended = time.monotonic()
    assert replicas(cluster, ns)[0] == 3
    # ... does the agent go back to minReplicas
    assert eventually(lambda: replicas(cluster, ns) == (1, 1), timeout=30)
    assert time.monotonic() - ended >= SCALE_DOWN_COOLDOWN_SECONDS - 1.5
    down = [m for m in scaled_events(cluster, ns) if m not in up]
    assert len(down) == 1, down  # straight to minReplicas, once
    assert down[0].startswith("scaled from 3 to 1: 0 open tasks, 2 per replica, bounds 1..3")


def test_an_agent_without_autoscaling_keeps_its_replicas(
    cluster: Cluster, operator: OperatorProcess, ready_agent: tuple[str, str]
) -> None:
    ns, org_id = ready_agent
    for _ in range(5):
        create_task(cluster, task_manifest(ns, org_id))
    # once the operator counted the 5 open tasks (its own gauge), it would have scaled by now
    assert eventually(lambda: operator.metric(OPEN, namespace=ns, agent="agent") == 5, timeout=30)
    assert replicas(cluster, ns) == (1, 1)
    assert scaled_events(cluster, ns) == []
