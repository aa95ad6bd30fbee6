"""The Helm chart (charts/humanwork-operator) installs what the kustomize overlays install.

- `helm lint --strict` is clean, with the defaults and with each optional part on;
- `helm template` with the defaults renders exactly the objects of `kubectl kustomize
  manifests/overlays/production` (kind, namespace, name and whole content), apart from the
  differences the chart's README documents, which are asserted exactly: no Namespace (Helm
  keeps its release in it, so it exists first) and the CRDs kept on uninstall;
  `tls.certManager.enabled=true` renders manifests/overlays/production-cert-manager the same
  way; `database.embedded.enabled=true` the dev overlay's SQLite claim and single replica;
  humanwork_dev/node-values.yaml (the release the real-node tests install and upgrade, where
  an approval then runs end to end: tests/node/test_in_cluster.py) renders
  manifests/overlays/node;
- the chart's CRDs are the ones the models generate (`make crds` writes both copies);
- `helm install` then `helm upgrade` on the shared local cluster, in a namespace of the test's
  own, change what the values say, and leave the shared install's objects untouched.

helm comes from humanwork_dev/scripts/build-helm.sh (`make helm-binaries`), kubectl from the
control plane's build.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from humanwork_core import crdgen
from humanwork_dev import cluster as local
from humanwork_dev import helmdocs
from tests.conftest import Cluster
from tests.integration.conftest import REPO

CHART = REPO / "charts" / "humanwork-operator"
NODE_VALUES = REPO / "humanwork_dev" / "node-values.yaml"
NAMESPACE = "humanwork-system"
Doc = dict[str, Any]
Key = tuple[str, str, str]


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., str]]:
    """Run helm (built once per machine) with its state in a folder of the test's own."""
    script = REPO / "humanwork_dev" / "scripts" / "build-helm.sh"
    built = subprocess.run(["bash", str(script)], check=True, capture_output=True, text=True)
    binary = Path(built.stdout.strip().splitlines()[-1]) / "helm"
    home = tmp_path_factory.mktemp("helm-home")
    env = {
        **os.environ,
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }

    def run(*args: str, kubeconfig: str | None = None, ok: bool = True) -> str:
        done = subprocess.run(
            [str(binary), *args],
            capture_output=True,
            text=True,
            env={**env, **({"KUBECONFIG": kubeconfig} if kubeconfig else {})},
            check=False,
            timeout=120,
        )
        if ok and done.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} failed: {done.stderr.strip()}")
        if not ok and done.returncode == 0:
            raise AssertionError(f"helm {' '.join(args)} succeeded: {done.stdout[:400]}")
        return done.stdout + done.stderr

    yield run


def sets(values: dict[str, str]) -> list[str]:
    return [arg for key, value in values.items() for arg in ("--set", f"{key}={value}")]


def template(
    helm: Callable[..., str], values: dict[str, str] | None = None, files: tuple[Path, ...] = ()
) -> list[Doc]:
    given = [arg for path in files for arg in ("-f", str(path))]
    out = helm("template", "humanwork", str(CHART), "--namespace", NAMESPACE, *given,
               *sets(values or {}))  # fmt: skip
    return [doc for doc in yaml.safe_load_all(out) if doc]


def kustomize(overlay: str) -> list[Doc]:
    kubectl = local.binaries(build=False) / "kubectl"
    out = subprocess.run(
        [str(kubectl), "kustomize", str(REPO / overlay)], check=True, capture_output=True, text=True
    ).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def key(doc: Doc) -> Key:
    meta = doc["metadata"]
    return (doc["kind"], meta.get("namespace", ""), meta["name"])


def by_key(docs: list[Doc]) -> dict[Key, Doc]:
    found = {key(doc): doc for doc in docs}
    assert len(found) == len(docs), "two objects with one kind, namespace and name"
    return found


def documented_differences(overlay: list[Doc], namespace: bool = False) -> list[Doc]:
    """The overlay's objects as the chart renders them: the README's list of differences
    (the Namespace only with namespace.create=true)."""
    out = []
    for doc in copy.deepcopy(overlay):
        if doc["kind"] == "Namespace" and not namespace:
            continue  # Helm keeps its release in the namespace: it exists before the install
        if doc["kind"] == "CustomResourceDefinition":
            doc["metadata"]["annotations"] = {"helm.sh/resource-policy": "keep"}
        out.append(doc)
    return out


def assert_same_objects(rendered: list[Doc], overlay: list[Doc], namespace: bool = False) -> None:
    chart, kust = by_key(rendered), by_key(documented_differences(overlay, namespace))
    assert sorted(chart) == sorted(kust), {
        "only in the chart": sorted(set(chart) - set(kust)),
        "only in the overlay": sorted(set(kust) - set(chart)),
    }
    for k in sorted(kust):
        assert chart[k] == kust[k], f"{k} differs:\n{yaml.safe_dump(chart[k])}\n---\n" + (
            yaml.safe_dump(kust[k])
        )


# --- no cluster needed ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "values",
    [
        {},
        {"tls.certManager.enabled": "true"},
        {"database.embedded.enabled": "true", "auditCheckpoints.enabled": "false"},
        {"monitoring.prometheusRule.enabled": "true", "monitoring.dashboard.enabled": "true"},
    ],
    ids=["defaults", "cert-manager", "embedded-database", "monitoring"],
)
def test_helm_lint_is_clean(helm: Callable[..., str], values: dict[str, str]) -> None:
    out = helm("lint", "--strict", str(CHART), "--namespace", NAMESPACE, *sets(values))
    assert "1 chart(s) linted, 0 chart(s) failed" in out, out
    assert "[WARNING]" not in out and "[ERROR]" not in out, out


def test_defaults_render_the_production_overlay(helm: Callable[..., str]) -> None:
    rendered, overlay = template(helm), kustomize("manifests/overlays/production")
    assert len(rendered) >= 50  # CRDs, policies, both components: not an empty chart
    assert_same_objects(rendered, overlay)
    # rendered for a GitOps tool (no Helm release): the Namespace with its Pod Security labels
    assert_same_objects(template(helm, {"namespace.create": "true"}), overlay, namespace=True)


def test_cert_manager_renders_the_cert_manager_overlay(helm: Callable[..., str]) -> None:
    rendered = template(helm, {"tls.certManager.enabled": "true"})
    overlay = kustomize("manifests/overlays/production-cert-manager")
    assert {"Certificate", "Issuer"} <= {doc["kind"] for doc in rendered}
    assert_same_objects(rendered, overlay)


def in_merge_order(doc: Doc, renamed: dict[str, str]) -> Doc:
    """`doc` with the generated Secrets' names in `renamed` replaced, and the lists an
    overlay's patches merge into (a pod's volumes, a container's env and mounts) sorted."""
    text = json.dumps(doc)
    for generated, name in renamed.items():
        text = text.replace(f'"{generated}"', f'"{name}"')
    out: Doc = json.loads(text)
    if out["kind"] == "Deployment":
        pod = out["spec"]["template"]["spec"]
        pod["volumes"] = sorted(pod["volumes"], key=lambda v: v["name"])
        for container in pod["containers"]:
            for field in ("env", "volumeMounts"):
                container[field] = sorted(container[field], key=lambda v: v["name"])
    return out


def test_node_values_render_the_node_overlay(helm: Callable[..., str]) -> None:
    """humanwork_dev/node-values.yaml, the release the real-node tests and `make up` install
    (humanwork_dev.incluster), renders the objects of manifests/overlays/node with the same
    content, apart from the documented differences, the order the overlay's patches merge
    lists in (env, volumes), and the dev Secrets the overlay generates (hashed names): the
    harness makes humanwork-platform-secrets from the overlay's, the chart renders the
    database's with the same URL."""
    rendered, overlay = template(helm, files=(NODE_VALUES,)), kustomize("manifests/overlays/node")
    generated = {d["metadata"]["name"]: d for d in overlay if d["kind"] == "Secret"}
    renamed = {name: name.rsplit("-", 1)[0] for name in generated}
    assert sorted(renamed.values()) == ["humanwork-platform-database", "humanwork-platform-secrets"]
    chart = by_key(rendered)
    database = chart.pop(("Secret", NAMESPACE, "humanwork-platform-database"))
    url = next(d["data"]["url"] for n, d in generated.items() if renamed[n].endswith("database"))
    assert database["stringData"]["url"] == base64.b64decode(url).decode()
    assert [k for k in chart if k[0] == "Secret"] == []
    pods = [d for d in chart.values() if d["kind"] == "Deployment"]
    assert [d["spec"]["template"]["spec"]["nodeSelector"] for d in pods] == [
        {"humanwork.dev/node": "real"}
    ] * 2  # not a rendering that matches by leaving the node overlay's patches out
    assert_same_objects(
        [in_merge_order(d, {}) for d in chart.values()],
        [in_merge_order(d, renamed) for d in overlay if d["kind"] != "Secret"],
    )


def test_embedded_database_is_the_dev_overlays_sqlite_claim(helm: Callable[..., str]) -> None:
    values = {"database.embedded.enabled": "true", "auditCheckpoints.enabled": "false"}
    chart, dev = by_key(template(helm, values)), by_key(kustomize("manifests/overlays/dev"))
    claim = ("PersistentVolumeClaim", NAMESPACE, "humanwork-platform-data")
    assert chart[claim]["spec"] == dev[claim]["spec"]
    deployment = ("Deployment", NAMESPACE, "humanwork-platform-api")
    spec, dev_spec = chart[deployment]["spec"], dev[deployment]["spec"]
    assert spec["replicas"] == dev_spec["replicas"] == 1
    assert spec["strategy"] == {"type": "Recreate"} == dev_spec["strategy"]
    pod, dev_pod = spec["template"]["spec"], dev_spec["template"]["spec"]
    assert "initContainers" not in pod
    assert [v for v in pod["volumes"] if v["name"] == "data"] == [
        v for v in dev_pod["volumes"] if v["name"] == "data"
    ]
    mounts = pod["containers"][0]["volumeMounts"]
    assert {"name": "data", "mountPath": "/var/lib/humanwork"} in mounts
    config = chart[("ConfigMap", NAMESPACE, "humanwork-platform-config")]["data"]
    assert config["HUMANWORK_MIGRATE_ON_STARTUP"] == "true"
    secret = chart[("Secret", NAMESPACE, "humanwork-platform-database")]
    assert secret["stringData"] == {"url": "sqlite+aiosqlite:////var/lib/humanwork/platform.db"}
    assert secret["metadata"]["labels"]["humanwork.io/dev-only"] == "true"
    # the production defaults hold no Secret at all
    assert not [k for k in by_key(template(helm)) if k[0] == "Secret"]


def test_embedded_database_refuses_the_audit_checkpoints(helm: Callable[..., str]) -> None:
    out = helm(
        "template", "humanwork", str(CHART), *sets({"database.embedded.enabled": "true"}), ok=False
    )
    assert "auditCheckpoints.enabled needs the external database" in out, out


def test_monitoring_renders_the_rules_and_the_dashboard(helm: Callable[..., str]) -> None:
    """Off by default; on, the PrometheusRule holds manifests/monitoring/rules.yaml's groups
    and the ConfigMap its dashboard, as they are."""
    monitoring = REPO / "manifests" / "monitoring"
    kinds = {"PrometheusRule", "ConfigMap"}
    defaults = by_key(template(helm))
    assert not [k for k in defaults if k[0] == "PrometheusRule"]
    assert ("ConfigMap", NAMESPACE, "humanwork-operator-dashboard") not in defaults
    on = {"monitoring.prometheusRule.enabled": "true", "monitoring.dashboard.enabled": "true"}
    rendered = {k: v for k, v in by_key(template(helm, on)).items() if k[0] in kinds}
    rule = rendered[("PrometheusRule", NAMESPACE, "humanwork-operator")]
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["spec"] == yaml.safe_load((monitoring / "rules.yaml").read_text())
    board = rendered[("ConfigMap", NAMESPACE, "humanwork-operator-dashboard")]
    assert board["metadata"]["labels"] == {"grafana_dashboard": "1"}
    expected = json.loads((monitoring / "dashboard.json").read_text())
    assert json.loads(board["data"]["humanwork-operator.json"]) == expected


def test_operator_env_reaches_the_operator_container(helm: Callable[..., str]) -> None:
    """`operator.env` adds settings (the agents' traces here) to the operator's container,
    after the chart's own; none by default."""

    def env(values: dict[str, str] | None = None) -> list[dict[str, str]]:
        docs = by_key(template(helm, values))
        deployment = docs[("Deployment", NAMESPACE, "humanwork-operator")]
        found: list[dict[str, str]] = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
        return found

    defaults = env()
    traced = env(
        {
            "operator.env.HUMANWORK_OPERATOR_AGENT_TRACES_ENDPOINT": "http://otel.obs:4318",
            "operator.env.HUMANWORK_OPERATOR_AGENT_TRACES_NAMESPACES": "team=obs",
        }
    )
    assert traced[: len(defaults)] == defaults
    assert traced[len(defaults) :] == [
        {"name": "HUMANWORK_OPERATOR_AGENT_TRACES_ENDPOINT", "value": "http://otel.obs:4318"},
        {"name": "HUMANWORK_OPERATOR_AGENT_TRACES_NAMESPACES", "value": "team=obs"},
    ]


def test_chart_crds_are_the_generated_ones() -> None:
    assert crdgen.check(CHART / "files" / "crds") == []


def test_values_table_is_current() -> None:
    assert helmdocs.main(["--chart", str(CHART), "--check"]) == 0
    readme = (CHART / "README.md").read_text()
    for row in helmdocs.rows((CHART / "values.yaml").read_text()):
        assert f"| `{row.path}` |" in readme


# --- on the shared local cluster -----------------------------------------------------------


def shared_versions(cluster: Cluster) -> dict[str, str]:
    """The resourceVersions of the shared install's cluster-wide objects."""
    rbac = client.RbacAuthorizationV1Api(cluster.api)
    ext = client.ApiextensionsV1Api(cluster.api)
    admission = client.AdmissionregistrationV1Api(cluster.api)
    versions = {
        f"clusterrole/{name}": rbac.read_cluster_role(name).metadata.resource_version
        for name in ("humanwork-operator", "humanwork-platform-api")
    }
    for crd in ("agentinstances.humanwork.io", "agentictasks.humanwork.io"):
        versions[f"crd/{crd}"] = ext.read_custom_resource_definition(crd).metadata.resource_version
    for policy in admission.list_validating_admission_policy().items:
        versions[f"vap/{policy.metadata.name}"] = policy.metadata.resource_version
    versions["role/default/humanwork-operator"] = rbac.read_namespaced_role(
        "humanwork-operator", "default"
    ).metadata.resource_version
    return versions


def test_install_then_upgrade_on_the_local_cluster(
    cluster: Cluster,
    installed: None,
    make_namespace: Callable[..., str],
    helm: Callable[..., str],
) -> None:
    # A second copy beside the shared install (tests/fixtures/stack.py `installed`): the
    # CRDs exist already (Helm refuses objects it does not own) and a second set of admission
    # policies would judge the shared components' writes by this copy's identities, so both
    # stay off; cluster-wide names get the namespace as prefix. The operator pods land on
    # the kwok node, where nothing runs, so no second operator competes for the Lease.
    ns = make_namespace("helm", {"pod-security.kubernetes.io/enforce": "restricted"})
    prefix = f"{ns}-"
    before = shared_versions(cluster)
    values = {
        "crds.install": "false",
        "policies.enabled": "false",
        "clusterResourcePrefix": prefix,
    }
    release = ["humanwork", str(CHART), "--namespace", ns, "--kubeconfig", cluster.kubeconfig]
    try:
        helm("install", *release, *sets(values))
        apps = client.AppsV1Api(cluster.api)
        core = client.CoreV1Api(cluster.api)
        rbac = client.RbacAuthorizationV1Api(cluster.api)
        policy = client.PolicyV1Api(cluster.api)
        platform = apps.read_namespaced_deployment("humanwork-platform-api", ns)
        assert platform.spec.replicas == 3
        assert platform.metadata.labels["app.kubernetes.io/managed-by"] == "Helm"
        params = core.read_namespaced_config_map("humanwork-admission", ns).data
        assert params["platformApiUser"] == f"system:serviceaccount:{ns}:humanwork-platform-api"
        assert params["agentMaxCPU"] == "2"
        binding = rbac.read_cluster_role_binding(f"{prefix}humanwork-operator")
        assert binding.subjects[0].namespace == ns
        assert binding.role_ref.name == f"{prefix}humanwork-operator"
        assert len(policy.list_namespaced_pod_disruption_budget(ns).items) == 2

        upgrade = {"platform.replicas": "1", "admission.agentMaxCPU": "1"}
        upgrade["podDisruptionBudgets"] = "false"
        helm("upgrade", *release, "--reuse-values", *sets(upgrade))
        assert apps.read_namespaced_deployment("humanwork-platform-api", ns).spec.replicas == 1
        params = core.read_namespaced_config_map("humanwork-admission", ns).data
        assert params["agentMaxCPU"] == "1"
        assert policy.list_namespaced_pod_disruption_budget(ns).items == []
        history = helm("history", *release[:1], *release[2:])
        assert "upgrade complete" in history.lower(), history
    finally:
        helm("uninstall", *release[:1], *release[2:])
    with pytest.raises(client.ApiException) as gone:
        client.RbacAuthorizationV1Api(cluster.api).read_cluster_role(f"{prefix}humanwork-operator")
    assert gone.value.status == 404
    assert shared_versions(cluster) == before
