"""The kustomize base and overlays build, say what the docs say they say, and the API server
accepts each of them (server-side dry run), so what users `kubectl apply -k` or hand to
GitOps is valid against a real API server.

Checked on the built output of every overlay: every pod is hardened (the restricted Pod
Security Standard and more: requests and limits, probes, a read-only root filesystem with
only /tmp writable), the platform's Service is where the operator sends agents, every
environment variable names a real setting, the dev overlay is one replica with its dev-only
Secrets marked as such, and the production overlay holds no Secret at all, runs the
platform on several replicas spread out with disruption budgets and reads the database and
OIDC settings from the Secrets docs/operations.md tells users to create.
"""

from __future__ import annotations

import base64
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from agent_operator.config import OperatorSettings
from humanwork_dev.deployables import all_settings
from tests.conftest import Cluster
from tests.integration.conftest import REPO
from tests.support import eventually

KUSTOMIZATIONS = [
    "manifests/base",
    "manifests/base/operator",
    "manifests/base/platform",
    "manifests/base/policies",
    "manifests/overlays/dev",
    "manifests/overlays/node",
    "manifests/overlays/production",
    "manifests/samples",
]
INSTALLABLE = [
    "manifests/base",
    "manifests/overlays/dev",
    "manifests/overlays/node",
    "manifests/overlays/production",
]
OVERLAYS = ["manifests/overlays/dev", "manifests/overlays/node", "manifests/overlays/production"]
DEV_OVERLAYS = ["manifests/overlays/dev", "manifests/overlays/node"]
PLATFORM = "humanwork-platform-api"
OPERATOR = "humanwork-operator"
Doc = dict[str, Any]

_built: dict[str, list[Doc]] = {}


def build(cluster: Cluster, path: str) -> list[Doc]:
    """`kubectl kustomize <path>`, parsed (built once per session)."""
    if path not in _built:
        out = cluster.kubectl("kustomize", str(REPO / path)).stdout
        _built[path] = [doc for doc in yaml.safe_load_all(out) if doc]
    return _built[path]


def one(docs: list[Doc], kind: str, name: str) -> Doc:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, (kind, name, [d["metadata"]["name"] for d in docs if d["kind"] == kind])
    return found[0]


def container(deployment: Doc, name: str) -> Doc:
    spec = deployment["spec"]["template"]["spec"]
    return next(c for c in spec["containers"] if c["name"] == name)


@pytest.mark.parametrize("path", KUSTOMIZATIONS)
def test_every_kustomization_builds(cluster: Cluster, path: str) -> None:
    docs = build(cluster, path)
    assert docs
    for doc in docs:
        assert doc["metadata"].get("name"), doc
        labels = doc["metadata"].get("labels") or {}
        if not path.endswith("samples"):
            assert labels.get("app.kubernetes.io/part-of") == "humanwork" or doc["kind"] in (
                "Secret",
                "ConfigMap",
                "PodDisruptionBudget",
            ), (doc["kind"], doc["metadata"]["name"])


def test_the_base_builds_with_every_part(cluster: Cluster) -> None:
    docs = build(cluster, "manifests/base")
    kinds = Counter(doc["kind"] for doc in docs)
    assert kinds["CustomResourceDefinition"] == 2
    assert kinds["ValidatingAdmissionPolicy"] == kinds["ValidatingAdmissionPolicyBinding"] >= 3
    assert kinds["ServiceAccount"] == 2  # the operator and the platform API
    # the operator's, the platform's, and the operator's org Secrets (bound per org namespace
    # by the operator itself)
    assert kinds["ClusterRole"] == 3 and kinds["ClusterRoleBinding"] == 2
    # the platform's and the operator's (its key Secrets), in humanwork-system; the
    # operator's in default (the API server's endpoints)
    assert kinds["Role"] == kinds["RoleBinding"] == 3
    assert kinds["Deployment"] == 2 and kinds["Service"] == 1 and kinds["Namespace"] == 1
    assert kinds["NetworkPolicy"] == 2  # the operator's and the platform's own
    # no Secret: the overlays (dev) or the users (production) make them, and the operator
    # generates its own key material
    assert kinds["Secret"] == 0
    namespace = one(docs, "Namespace", "humanwork-system")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


@pytest.mark.parametrize("path", INSTALLABLE)
def test_every_pod_is_hardened_with_resources_and_probes(cluster: Cluster, path: str) -> None:
    deployments = [d for d in build(cluster, path) if d["kind"] == "Deployment"]
    assert {d["metadata"]["name"] for d in deployments} == {PLATFORM, OPERATOR}
    for deployment in deployments:
        where = f"{path}: {deployment['metadata']['name']}"
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True, where
        assert int(pod["securityContext"]["runAsUser"]) >= 1000, where
        assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault", where
        assert pod["serviceAccountName"] == deployment["metadata"]["name"], where
        volumes = {v["name"]: v for v in pod["volumes"]}
        for c in pod["containers"] + pod.get("initContainers", []):
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False, (where, c["name"])
            assert sc["readOnlyRootFilesystem"] is True, (where, c["name"])
            assert sc["capabilities"]["drop"] == ["ALL"], (where, c["name"])
            assert not sc.get("capabilities", {}).get("add"), (where, c["name"])
            assert not sc.get("privileged"), (where, c["name"])
            assert {"cpu", "memory"} <= c["resources"]["requests"].keys(), (where, c["name"])
            assert {"cpu", "memory"} <= c["resources"]["limits"].keys(), (where, c["name"])
            mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
            assert "emptyDir" in volumes[mounts["/tmp"]], (where, c["name"])
            assert ":" in c["image"] and not c["image"].endswith(":latest"), c["image"]
        for c in pod["containers"]:
            assert c["livenessProbe"]["httpGet"]["path"] == "/healthz", where
            assert c["readinessProbe"]["httpGet"]["path"] == "/healthz", where


@pytest.mark.parametrize("path", INSTALLABLE)
def test_the_platform_service_is_where_the_operator_sends_agents(
    cluster: Cluster, path: str
) -> None:
    docs = build(cluster, path)
    settings = OperatorSettings()
    service = one(docs, "Service", settings.platform_api_service)
    assert service["metadata"]["namespace"] == settings.platform_namespace
    deployment = one(docs, "Deployment", PLATFORM)
    assert deployment["metadata"]["namespace"] == settings.platform_namespace
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    (port,) = service["spec"]["ports"]
    ports = {p["name"]: p["containerPort"] for p in container(deployment, "platform-api")["ports"]}
    # the NetworkPolicy the operator gives agents allows the pod port: they must be equal
    assert port["port"] == ports[port["targetPort"]] == settings.platform_api_port
    # over TLS: the operator gives agents an https URL and the CA, the platform serves it
    operator = {e["name"]: e.get("value") for e in container(one(docs, "Deployment", OPERATOR),
                                                             "operator")["env"]}  # fmt: skip
    assert operator["HUMANWORK_OPERATOR_PLATFORM_API_SCHEME"] == "https"
    assert operator["HUMANWORK_OPERATOR_PLATFORM_CA_FILE"]
    config = one(docs, "ConfigMap", "humanwork-platform-config")["data"]
    assert config["HUMANWORK_PORT"] == str(settings.platform_api_port)
    assert config["HUMANWORK_KUBE_IN_CLUSTER"] == "true"
    assert config["HUMANWORK_HOST"] == "0.0.0.0"


def _env_names(deployment: Doc) -> set[str]:
    pod = deployment["spec"]["template"]["spec"]
    return {
        e["name"]
        for c in pod["containers"] + pod.get("initContainers", [])
        for e in c.get("env", [])
    }


@pytest.mark.parametrize("path", INSTALLABLE)
def test_every_variable_in_the_manifests_is_a_real_setting(cluster: Cluster, path: str) -> None:
    docs = build(cluster, path)
    settings = all_settings()
    platform = {v for s in settings["platform"] for v in s.variables}
    operator = {v for s in settings["operator"] for v in s.variables}
    config = one(docs, "ConfigMap", "humanwork-platform-config")["data"]
    assert set(config) <= platform, sorted(set(config) - platform)
    assert _env_names(one(docs, "Deployment", PLATFORM)) <= platform
    assert _env_names(one(docs, "Deployment", OPERATOR)) <= operator


def secret_files(pod: Doc, c: Doc) -> dict[str, tuple[str, str, bool]]:
    """{variable: (Secret name, key, optional)} of container `c`: the files of the
    projected volume mounted at its HUMANWORK_SECRETS_DIR (each named as its variable)."""
    env = {e["name"]: e for e in c.get("env", [])}
    if "HUMANWORK_SECRETS_DIR" not in env:
        return {}
    folder = env["HUMANWORK_SECRETS_DIR"]["value"]
    (mount,) = [m for m in c["volumeMounts"] if m["mountPath"] == folder]
    assert mount["readOnly"] is True
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    found = {}
    for source in volume["projected"]["sources"]:
        secret = source["secret"]
        for item in secret["items"]:
            found[item["path"]] = (secret["name"], item["key"], bool(secret.get("optional")))
    return found


def _secret_refs(deployment: Doc) -> dict[str, tuple[str, str, bool]]:
    """{variable: (Secret name, key, optional)} of the platform container."""
    pod = deployment["spec"]["template"]["spec"]
    return secret_files(pod, container(deployment, "platform-api"))


def _pods(docs: list[Doc]) -> list[tuple[str, Doc]]:
    """(where, pod spec) of every Deployment and CronJob."""
    found = []
    for d in docs:
        if d["kind"] == "Deployment":
            found.append((d["metadata"]["name"], d["spec"]["template"]["spec"]))
        elif d["kind"] == "CronJob":
            found.append(
                (d["metadata"]["name"], d["spec"]["jobTemplate"]["spec"]["template"]["spec"])
            )
    return found


@pytest.mark.parametrize("path", INSTALLABLE)
def test_no_secret_is_an_environment_variable(cluster: Cluster, path: str) -> None:
    """Every Secret a pod of ours reads is a file (a Secret volume or the platform's
    HUMANWORK_SECRETS_DIR), never `secretKeyRef` or `envFrom` of a Secret."""
    docs = build(cluster, path)
    assert "secretKeyRef" not in str(docs) and "secretRef" not in str(docs)
    platform = one(docs, "Deployment", PLATFORM)
    files = _secret_refs(platform)
    assert {"HUMANWORK_DATABASE_URL", "HUMANWORK_JWT_SECRET", "HUMANWORK_CREDENTIALS_KEYS",
            "HUMANWORK_ADMIN_PASSWORD"} <= set(files)  # fmt: skip
    secret_settings = {"DATABASE_URL", "DATABASE_OWNER_URL", "JWT_SECRET", "CREDENTIALS_KEYS",
                       "ADMIN_PASSWORD", "ROUTER_LLM_API_KEY"}  # fmt: skip
    for where, pod in _pods(docs):
        for c in pod["containers"] + pod.get("initContainers", []):
            names = {e["name"] for e in c.get("env", [])}
            assert not {f"HUMANWORK_{n}" for n in secret_settings} & names, (where, c["name"])
            for variable in secret_files(pod, c):
                assert variable.startswith("HUMANWORK_"), (where, variable)


def test_the_production_overlay_commits_no_secret_and_reads_the_documented_ones(
    cluster: Cluster,
) -> None:
    docs = build(cluster, "manifests/overlays/production")
    assert not [d for d in docs if d["kind"] == "Secret"]
    platform = one(docs, "Deployment", PLATFORM)
    assert _secret_refs(platform) == {
        "HUMANWORK_DATABASE_URL": ("humanwork-platform-database", "url", False),
        "HUMANWORK_JWT_SECRET": ("humanwork-platform-secrets", "jwt-secret", False),
        "HUMANWORK_CREDENTIALS_KEYS": ("humanwork-platform-secrets", "credentials-keys", False),
        "HUMANWORK_CREDENTIALS_ACTIVE_KEY": (
            "humanwork-platform-secrets",
            "credentials-active-key",
            False,
        ),
        "HUMANWORK_ADMIN_PASSWORD": ("humanwork-platform-secrets", "admin-password", True),
        "HUMANWORK_OIDC_JWKS_URL": ("humanwork-platform-oidc", "jwks-url", False),
        "HUMANWORK_OIDC_ISSUER": ("humanwork-platform-oidc", "issuer", False),
        "HUMANWORK_OIDC_AUDIENCE": ("humanwork-platform-oidc", "audience", False),
    }
    operations = (REPO / "docs/operations.md").read_text()
    for name, key, _ in _secret_refs(platform).values():
        assert name in operations and key in operations, (name, key)
    # the receipts' signing key: a Secret volume the platform container reads as files
    pod = platform["spec"]["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "receipt-key"]
    assert volume["secret"]["secretName"] == "humanwork-receipt-key"
    (mount,) = [m for m in container(platform, "platform-api")["volumeMounts"]
                if m["name"] == "receipt-key"]  # fmt: skip
    assert mount["readOnly"] is True
    env = {e["name"]: e.get("value") for e in container(platform, "platform-api")["env"]}
    assert env["HUMANWORK_RECEIPT_KEY_FILE"] == f"{mount['mountPath']}/key.pem"
    assert "humanwork-receipt-key" in operations


def test_the_production_overlay_is_highly_available(cluster: Cluster) -> None:
    docs = build(cluster, "manifests/overlays/production")
    platform = one(docs, "Deployment", PLATFORM)
    assert platform["spec"]["replicas"] >= 2
    assert platform["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    pod = platform["spec"]["template"]["spec"]
    keys = {t["topologyKey"] for t in pod["topologySpreadConstraints"]}
    assert {"kubernetes.io/hostname", "topology.kubernetes.io/zone"} <= keys
    assert pod["affinity"]["podAntiAffinity"]
    # one migration per pod start, in an init container; the servers do not migrate
    (migrate,) = pod["initContainers"]
    assert (
        migrate["args"] == ["migrate"]
        and migrate["image"] == container(platform, "platform-api")["image"]
    )
    config = one(docs, "ConfigMap", "humanwork-platform-config")["data"]
    assert config["HUMANWORK_MIGRATE_ON_STARTUP"] == "false"
    budgets = {d["metadata"]["name"]: d for d in docs if d["kind"] == "PodDisruptionBudget"}
    assert set(budgets) == {PLATFORM, OPERATOR}
    for name, budget in budgets.items():
        deployment = one(docs, "Deployment", name)
        selected = budget["spec"]["selector"]["matchLabels"]
        assert selected.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    assert budgets[PLATFORM]["spec"]["maxUnavailable"] < platform["spec"]["replicas"]
    operator = one(docs, "Deployment", OPERATOR)
    # a leader and a standby (a Lease elects the leader), so a budget of one unavailable
    # leaves one running through a drain
    assert operator["spec"]["replicas"] == 2
    assert budgets[OPERATOR]["spec"]["maxUnavailable"] < operator["spec"]["replicas"]


def test_the_dev_overlay_is_one_replica_on_sqlite_on_a_claim_with_marked_dev_secrets(
    cluster: Cluster,
) -> None:
    docs = build(cluster, "manifests/overlays/dev")
    platform = one(docs, "Deployment", PLATFORM)
    assert platform["spec"]["replicas"] == 1
    # one pod at a time on the SQLite file: a rollout stops the old pod first
    assert platform["spec"]["strategy"] == {"type": "Recreate"}
    secrets = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Secret"}
    assert secrets
    for secret in secrets.values():
        assert secret["metadata"]["labels"]["humanwork.io/dev-only"] == "true"
        assert "DEV ONLY" in secret["metadata"]["annotations"]["humanwork.io/warning"]
    refs = _secret_refs(platform)
    for name, _, _ in refs.values():
        assert name in secrets, name  # the generated (hash-suffixed) names are referenced
    name, key, _ = refs["HUMANWORK_DATABASE_URL"]
    url = base64.b64decode(secrets[name]["data"][key]).decode()
    assert url.startswith("sqlite+aiosqlite:////")
    database_dir = str(Path(url.removeprefix("sqlite+aiosqlite:///")).parent)
    mounts = {
        m["mountPath"]: m["name"] for m in container(platform, "platform-api")["volumeMounts"]
    }
    volumes = {v["name"]: v for v in platform["spec"]["template"]["spec"]["volumes"]}
    # the database outlives the pod: a claim, not an emptyDir
    claim = volumes[mounts[database_dir]]["persistentVolumeClaim"]["claimName"]
    assert one(docs, "PersistentVolumeClaim", claim)["spec"]["accessModes"] == ["ReadWriteOnce"]
    name, key, _ = refs["HUMANWORK_JWT_SECRET"]
    assert len(base64.b64decode(secrets[name]["data"][key])) >= 32


@pytest.mark.parametrize("path", INSTALLABLE)
def test_the_api_server_accepts_it(cluster: Cluster, installed: None, path: str) -> None:
    # (a dry run of namespaced objects needs their namespace to exist: `installed` made it)
    # The dev overlays turn the platform's strategy into Recreate: a server-side apply would
    # keep the rollingUpdate that `installed` (a client-side apply of the base) owns, so they
    # are applied as their install instructions say, client-side (`kubectl apply -k`).
    server_side = [] if path in DEV_OVERLAYS else ["--server-side", "--force-conflicts"]
    done = cluster.kubectl(
        "apply",
        "--dry-run=server",
        *server_side,
        "--field-manager=humanwork-test",
        "-k",
        str(REPO / path),
    )
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert any("deployment.apps/humanwork-operator" in line for line in lines)
    assert any("deployment.apps/humanwork-platform-api" in line for line in lines)
    assert all("(server dry run)" in line for line in lines), lines
    assert len(lines) == len(build(cluster, path))


@pytest.mark.parametrize("name", [OPERATOR, PLATFORM])
def test_the_pods_pass_the_restricted_standard(
    cluster: Cluster, installed: None, name: str
) -> None:
    # humanwork-system enforces `restricted`; a pod that did not pass would never be created
    core = client.CoreV1Api(cluster.api)
    namespace: Any = core.read_namespace("humanwork-system")
    assert namespace.metadata.labels["pod-security.kubernetes.io/enforce"] == "restricted"

    def running() -> bool:
        pods: Any = core.list_namespaced_pod(
            "humanwork-system", label_selector=f"app.kubernetes.io/name={name}"
        )
        return any(p.status.phase == "Running" for p in pods.items)

    assert eventually(running, timeout=60)
