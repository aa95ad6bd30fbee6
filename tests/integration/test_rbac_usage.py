"""Least privilege, checked from the API server's own audit log: every request the
operator made was allowed, and every permission its ClusterRole grants was used.

The local control plane logs (at Metadata level) every request of the humanwork-system
ServiceAccounts. This module drives one whole AgentInstance and AgenticTask lifecycle
(the rest of the session adds more), then compares what the operator did with
manifests/base/operator/rbac.yaml.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from agent_operator.builders import AGENT_RBAC_RULES
from agent_operator.kube import USER_AGENT
from humanwork_core import taskflow
from humanwork_core.resources import Verdict
from humanwork_dev.processes import PLATFORM_NS, OperatorProcess
from tests.agents import (
    GROUP,
    PLURAL,
    VERSION,
    create_instance,
    get_instance,
    wait_phase,
    wait_rotated,
)
from tests.conftest import Cluster
from tests.integration.conftest import REPO
from tests.integration.test_tasks import Writer, approve, create_task, task_manifest, wait_task
from tests.support import eventually

OPERATOR_USER = f"system:serviceaccount:{PLATFORM_NS}:humanwork-operator"
Permission = tuple[str, str, str]  # (apiGroup, resource[/subresource], verb)


def granted(rbac_file: Path, role: str) -> set[Permission]:
    for doc in yaml.safe_load_all(rbac_file.read_text()):
        if doc and doc["kind"] == "ClusterRole" and doc["metadata"]["name"] == role:
            return {
                (group, resource, verb)
                for rule in doc["rules"]
                for group in rule["apiGroups"]
                for resource in rule["resources"]
                for verb in rule["verbs"]
            }
    raise AssertionError(f"no ClusterRole {role} in {rbac_file}")


def used(
    audit_log: Path, user: str, agents: tuple[str, ...]
) -> tuple[set[Permission], list[dict[str, Any]]]:
    """The permissions `user` exercised from one of the program `agents` (user agents: the
    tests also act under the operator's identity, to check the admission policies), and
    the requests authorization refused."""
    seen: set[Permission] = set()
    refused: list[dict[str, Any]] = []
    for line in audit_log.read_text().splitlines():
        entry = json.loads(line)
        if entry.get("user", {}).get("username") != user or "objectRef" not in entry:
            continue
        if not entry.get("userAgent", "").startswith(agents):
            continue
        ref = entry["objectRef"]
        resource = ref.get("resource", "")
        if ref.get("subresource"):
            resource += "/" + ref["subresource"]
        code = entry.get("responseStatus", {}).get("code", 0)
        if entry.get("annotations", {}).get("authorization.k8s.io/decision") == "forbid":
            refused.append(entry)  # RBAC said no (admission refusals are another matter)
            continue
        verb = entry["verb"]
        seen.add((ref.get("apiGroup", ""), resource, verb))
        if verb == "patch" and code == 201:  # a server-side apply that created the object
            seen.add((ref.get("apiGroup", ""), resource, "create"))
    return seen, refused


def drive_a_whole_lifecycle(cluster: Cluster, ns: str, org_id: str) -> None:
    core, objects = client.CoreV1Api(cluster.api), client.CustomObjectsApi(cluster.api)
    create_instance(cluster, ns, org_id)
    first = wait_phase(cluster, ns, "Ready")["status"]["token"]["jti"]
    objects.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        ns,
        PLURAL,
        "agent",
        {"metadata": {"annotations": {"humanwork.io/rotate-token": "now"}}},
    )
    wait_rotated(cluster, ns, first, timeout=20)
    core.delete_namespaced_service("agent-agent", ns)
    eventually(lambda: core.read_namespaced_service("agent-agent", ns), timeout=15)
    platform = Writer(cluster, PLATFORM_NS, "humanwork-platform-api", taskflow.Writer.PLATFORM_API)
    name = create_task(cluster, task_manifest(ns, org_id))
    task = wait_task(cluster, ns, name, lambda t: t.current_status().phase is not None)
    approve(platform, task, "read", Verdict.REJECT)
    wait_task(cluster, ns, name, lambda t: t.current_status().phase == "Rejected")
    objects.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        ns,
        "agentictasks",
        name,
        {"metadata": {"annotations": {"humanwork.io/archived": "now"}}},
    )
    eventually(
        lambda: (
            not objects.list_namespaced_custom_object(GROUP, VERSION, ns, "agentictasks")["items"]
        ),
        timeout=20,
    )
    objects.delete_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "agent")
    eventually(lambda: _gone(lambda: get_instance(cluster, ns)), timeout=20)


def _gone(read: Callable[[], Any]) -> bool:
    try:
        read()
    except client.ApiException as exc:
        return exc.status == 404
    return False


def test_the_operator_uses_exactly_the_permissions_it_is_granted(
    cluster: Cluster, operator: OperatorProcess, org: tuple[str, str]
) -> None:
    if not cluster.info:
        pytest.skip("the API server's audit log is read on the local control plane only")
    ns, org_id = org
    drive_a_whole_lifecycle(cluster, ns, org_id)
    time.sleep(2)  # the audit backend writes asynchronously
    audit_log = Path(cluster.info.state_dir) / "logs" / "audit.log"
    seen, refused = used(audit_log, OPERATOR_USER, (USER_AGENT, "kopf/"))

    assert not refused, [
        (e["verb"], e["objectRef"], e.get("responseStatus", {}).get("message")) for e in refused[:5]
    ]
    grants = granted(REPO / "manifests/base/operator/rbac.yaml", "humanwork-operator")
    # every call it made is covered by a grant (no wildcard, no cluster-admin shortcut)
    assert seen <= grants, sorted(seen - grants)
    # and every grant was used, or is held only to be granted to agents (Kubernetes
    # refuses a Role that grants more than its creator holds): nothing "just in case"
    delegated = {
        (group, resource, verb)
        for rule in AGENT_RBAC_RULES
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    assert grants <= seen | delegated, sorted(grants - seen - delegated)
    assert delegated <= grants  # the operator could not create the agents' Roles otherwise
