"""The kustomize base builds, and the API server accepts all of it (server-side dry run),
so what users `kubectl apply -k` or hand to GitOps is valid against a real API server."""

from __future__ import annotations

from collections import Counter

import yaml
from kubernetes import client

from tests.conftest import Cluster
from tests.integration.conftest import REPO
from tests.support import eventually


def test_the_base_builds_with_every_part(cluster: Cluster) -> None:
    built = cluster.kubectl("kustomize", str(REPO / "manifests/base")).stdout
    kinds = Counter(doc["kind"] for doc in yaml.safe_load_all(built) if doc)
    assert kinds["CustomResourceDefinition"] == 2
    assert kinds["ValidatingAdmissionPolicy"] == kinds["ValidatingAdmissionPolicyBinding"] >= 3
    assert kinds["ServiceAccount"] == 2  # the operator and the platform API
    assert kinds["ClusterRole"] == kinds["ClusterRoleBinding"] == 2
    assert kinds["Deployment"] == 1 and kinds["Namespace"] == 1
    namespace = next(d for d in yaml.safe_load_all(built) if d and d["kind"] == "Namespace")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_the_api_server_accepts_the_whole_base(cluster: Cluster, installed: None) -> None:
    done = cluster.kubectl(
        "apply",
        "--dry-run=server",
        "--server-side",
        "--force-conflicts",
        "--field-manager=humanwork-test",
        "-k",
        str(REPO / "manifests/base"),
    )
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert any("deployment.apps/humanwork-operator" in line for line in lines)
    assert all("(server dry run)" in line for line in lines), lines


def test_the_operator_pod_passes_the_restricted_standard(cluster: Cluster, installed: None) -> None:
    # humanwork-system enforces `restricted`; a pod that did not pass would never be created
    core = client.CoreV1Api(cluster.api)
    labels = core.read_namespace("humanwork-system").metadata.labels
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"

    def running() -> bool:
        pods = core.list_namespaced_pod(
            "humanwork-system", label_selector="app.kubernetes.io/name=humanwork-operator"
        ).items
        return any(p.status.phase == "Running" for p in pods)

    assert eventually(running, timeout=60)
