"""What the operator writes for one org, on the real control plane: an org namespace as
the platform makes it is not patched, its first provisioning is one Event, and its status
is written twice (with the token once the children are applied, then on Ready), a pod
count held back until the pod is Ready yet written when it stays (the scale subresource's
counts are not left behind).

Each test runs an operator of a shard of its own, with the settle time it needs
(`HUMANWORK_OPERATOR_REPLICAS_SETTLE_SECONDS`): long, so that a held-back count is never
written by the clock while the test watches; short, so that one is.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch
from urllib3.exceptions import ProtocolError

from humanwork_core.keys import RESTRICTED_NAMESPACE_LABELS
from humanwork_core.resources import names
from tests.agents import (
    GROUP,
    LLM_KEY,
    PLURAL,
    VERSION,
    create_instance,
    get_instance,
    wait_phase,
    widened_bounds,
)
from tests.conftest import Cluster
from tests.shards import SHARD_LABEL, shard_operators
from tests.support import eventually


@pytest.fixture
def shard_operator(
    cluster: Cluster, installed: None, tmp_path: Path
) -> Iterator[Callable[[int], str]]:
    """Start an operator of a fresh shard with the given settle time; its shard."""
    with shard_operators(cluster, tmp_path) as start:

        def start_settled(settle: int) -> str:
            shard = f"writes-{uuid.uuid4().hex[:6]}"
            start(shard, extra={"HUMANWORK_OPERATOR_REPLICAS_SETTLE_SECONDS": str(settle)})
            return shard

        yield start_settled


def platform_org(
    cluster: Cluster, make_namespace: Callable[..., str], shard: str
) -> tuple[str, str]:
    """An org namespace labelled as the platform creates one (its org, every restricted
    Pod Security label), of `shard`, with the LLM key Secret; (namespace, org id)."""
    org_id = str(uuid.uuid4())
    labels = {"humanwork.io/org-id": org_id, SHARD_LABEL: shard, **RESTRICTED_NAMESPACE_LABELS}
    ns = make_namespace("org", labels=labels)
    client.CoreV1Api(cluster.api).create_namespaced_secret(
        ns,
        client.V1Secret(metadata=client.V1ObjectMeta(name="llm"), string_data={"api-key": LLM_KEY}),
    )
    return ns, org_id


class StatusLog:
    """Every distinct status the namespace's AgentInstance `agent` has had, in order, as a
    watch started before its creation sees them (each one a status write)."""

    def __init__(self, cluster: Cluster, ns: str) -> None:
        self.statuses: list[dict[str, Any]] = []
        self._watch = watch.Watch()
        objects = client.CustomObjectsApi(cluster.api)
        listed = objects.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)
        self._args = (objects.list_namespaced_custom_object, GROUP, VERSION, ns, PLURAL)
        self._version = listed["metadata"]["resourceVersion"]
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        stream = self._watch.stream(
            *self._args, resource_version=self._version, timeout_seconds=120
        )
        with contextlib.suppress(ProtocolError):  # the watch stopped
            for event in stream:
                status = event["object"].get("status")
                if status and (not self.statuses or self.statuses[-1] != status):
                    self.statuses.append(status)

    def stop(self) -> None:
        self._watch.stop()


def instance_events(cluster: Cluster, ns: str) -> list[client.CoreV1Event]:
    listed = client.CoreV1Api(cluster.api).list_namespaced_event(
        ns, field_selector="involvedObject.kind=AgentInstance"
    )
    return list(listed.items)


def test_a_platform_org_is_two_status_writes_one_event_and_no_namespace_patch(
    cluster: Cluster, shard_operator: Callable[[int], str], make_namespace: Callable[..., str]
) -> None:
    ns, org_id = platform_org(cluster, make_namespace, shard_operator(600))
    log = StatusLog(cluster, ns)
    create_instance(cluster, ns, org_id)
    ready = wait_phase(cluster, ns, "Ready")
    eventually(lambda: log.statuses and log.statuses[-1] == ready["status"], timeout=30)
    log.stop()

    # the status written once with the token as the children are applied, once on Ready:
    # never for the pod created but not yet Ready (its count waited for its readiness)
    phases = [(s["phase"], s.get("replicas", 0), s.get("readyReplicas", 0)) for s in log.statuses]
    assert phases == [("Provisioning", 0, 0), ("Ready", 1, 1)], phases
    assert log.statuses[0]["token"]["jti"] == ready["status"]["token"]["jti"]

    # one Event tells of the provisioning and names the token
    told = eventually(lambda: instance_events(cluster, ns), timeout=20)
    assert [e.reason for e in told] == ["Provisioned"], [(e.reason, e.message) for e in told]
    assert ready["status"]["token"]["jti"] in told[0].message

    # the namespace had every label: the operator did not write it
    namespace = client.CoreV1Api(cluster.api).read_namespace(ns)
    managers = {m.manager for m in namespace.metadata.managed_fields or []}
    assert names.OPERATOR_FIELD_MANAGER not in managers, managers


def test_a_pod_count_that_stays_is_written_when_its_settle_time_is_up(
    cluster: Cluster, shard_operator: Callable[[int], str], make_namespace: Callable[..., str]
) -> None:
    ns, org_id = platform_org(cluster, make_namespace, shard_operator(2))
    # a node selector no node matches: the pod is created and stays Pending, never Ready
    # (the bounds allow it while the operator applies the Deployment)
    with widened_bounds(cluster, agentNodeSelectors="humanwork.dev/nowhere=true"):
        eventually(
            lambda: create_instance(
                cluster, ns, org_id, nodeSelector={"humanwork.dev/nowhere": "true"}
            ),
            timeout=30,
        )
        apps = client.AppsV1Api(cluster.api)

        def pods() -> int:
            found = apps.list_namespaced_deployment(ns).items
            return sum(d.status.replicas or 0 for d in found)

        eventually(lambda: pods() == 1, timeout=60)

        def counted() -> dict[str, Any] | None:
            status = get_instance(cluster, ns).get("status") or {}
            return status if status.get("replicas") == 1 else None

        status = eventually(counted, timeout=60)
    assert status["readyReplicas"] == 0 and status["phase"] == "Provisioning", status
    assert [
        p.status.phase for p in client.CoreV1Api(cluster.api).list_namespaced_pod(ns).items
    ] == ["Pending"]
    scale = client.CustomObjectsApi(cluster.api).get_namespaced_custom_object_scale(
        GROUP, VERSION, ns, PLURAL, "agent"
    )
    assert scale["status"]["replicas"] == 1, scale
