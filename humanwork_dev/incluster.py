"""The product in-cluster on the real node (humanwork_dev.node): the operator and the
platform API as pods, installed the way a platform team installs them, by `helm upgrade
--install` of the chart charts/humanwork-operator (the release `humanwork` in
humanwork-system) with the values humanwork_dev/node-values.yaml (the same objects as the
kustomize overlay `manifests/overlays/node`, the dev overlay pinned to the real node; a test
of tests/integration/test_helm_chart.py compares the two renderings), and the fake Shopify
and Amazon as a pod of their own in `humanwork-fakes`. A second `deploy` with other
operator settings is a `helm upgrade` of the same release.

What the chart takes from its user the harness makes first: the namespace (with its Pod
Security labels), the Secret humanwork-platform-secrets (the dev overlay's committed
throwaway values) and the platform's serving certificate. The release takes over objects
already there (`--take-ownership`: the Service made for its address, or what an older
`kubectl apply -k` of the overlay left on a kept cluster).

The fakes run in the platform image (it carries Python, Starlette and uvicorn, all they
need); their source (humanwork_dev/fakes, which no image ships) is mounted from a
ConfigMap. Their credentials point at their Service, which the node overlay's platform
allowlist names. From the host, the platform is reached through its Service's cluster
address (kube-proxy's rules on the node answer it from the host too).

The platform serves HTTPS only: before the release is installed, its Service is made (for
its cluster address) and the harness's platform CA (humanwork_dev.pki, kept in
`<state>/platform-pki`) issues the serving certificate into the Secret
humanwork-platform-tls and publishes itself in the ConfigMap humanwork-platform-ca, which
the operator hands on to the agents. Two NetworkPolicies of the harness's add to the
manifests' own what this machine needs: the API server's real address and port (the
`kubernetes` EndpointSlice), and the fakes' ports for the platform.

Used by the real-node tests (tests/node/test_in_cluster.py) and by `make up` (its
container mode, humanwork_dev.stack).
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from humanwork_dev import cluster, node, pki

OVERLAY = cluster.REPO / "manifests" / "overlays" / "node"
DEV_OVERLAY = cluster.REPO / "manifests" / "overlays" / "dev"
CHART = cluster.REPO / "charts" / "humanwork-operator"
VALUES = cluster.REPO / "humanwork_dev" / "node-values.yaml"
"""The chart's values for the real node: what OVERLAY sets, as values."""
RELEASE = "humanwork"
HELM_SCRIPT = cluster.REPO / "humanwork_dev" / "scripts" / "build-helm.sh"
SYSTEM = "humanwork-system"
FAKES = "humanwork-fakes"  # namespace, Deployment and Service
SHOPIFY_PORT, AMAZON_PORT = 8091, 8092
CONTROL_PORT = 8099
"""The fakes' control port (humanwork_dev.fakes.control): the host reaches it at the pod's
address; no Service names it."""
FAKES_HOST = f"{FAKES}.{FAKES}.svc.cluster.local"
PLATFORM_IMAGE = "humanwork/platform-api:0.1.0"
DEV_ADMIN_PASSWORD = "dev-admin-password-NOT-FOR-PRODUCTION"  # the dev overlay's, committed
FAKES_SOURCE = cluster.REPO / "humanwork_dev" / "fakes"
RUNNING = cluster.REPO / "humanwork_dev" / "running.py"
"""Beside the fakes in their ConfigMap: the one module of humanwork_dev they import."""


class InClusterError(RuntimeError):
    """The product could not be deployed on the real node."""


@dataclass
class Kubectl:
    """kubectl with one kubeconfig."""

    path: str
    kubeconfig: str

    def __call__(
        self, *args: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [self.path, f"--kubeconfig={self.kubeconfig}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
        )
        if check and done.returncode != 0:
            raise InClusterError(f"kubectl {' '.join(args)} failed: {done.stderr.strip()}")
        return done

    def json(self, *args: str) -> Any:
        return json.loads(self(*args, "-o", "json").stdout)


@dataclass
class Deployed:
    """What the deployed product is, as the host reaches it."""

    platform_url: str
    fakes_ip: str
    credentials: dict[str, dict[str, str]]
    ca_file: Path
    """The platform CA's certificate: what a client verifies the platform's HTTPS with."""
    revision: int = 0
    """The Helm release's revision this deploy left (1 after the install, +1 per upgrade)."""

    def verify(self) -> ssl.SSLContext:
        """A client context that trusts the platform's CA (for `httpx`'s `verify`)."""
        return ssl.create_default_context(cafile=str(self.ca_file))


def _pod_spec(containers: list[dict[str, Any]], volumes: list[dict[str, Any]]) -> dict[str, Any]:
    """A pod on the real node under the `restricted` Pod Security profile."""
    return {
        "nodeSelector": {node.LABEL[0]: node.LABEL[1]},
        "tolerations": [{"key": node.TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}],
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 10001,
            "runAsGroup": 10001,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "containers": containers,
        "volumes": volumes,
    }


def fakes_manifests() -> list[dict[str, Any]]:
    """Namespace, source ConfigMap, Deployment and Service of the fake upstreams."""
    files = sorted(FAKES_SOURCE.glob("*.py"))
    data = {"humanwork_dev__init__.py": "", "humanwork_dev_running.py": RUNNING.read_text()}
    data |= {f.name: f.read_text() for f in files}
    items = [
        {"key": "humanwork_dev__init__.py", "path": "humanwork_dev/__init__.py"},
        {"key": "humanwork_dev_running.py", "path": "humanwork_dev/running.py"},
    ] + [{"key": f.name, "path": f"humanwork_dev/fakes/{f.name}"} for f in files]
    labels = {"app.kubernetes.io/name": FAKES, "app.kubernetes.io/part-of": "humanwork-dev"}
    base = f"http://{FAKES_HOST}"
    container = {
        "name": "fakes",
        "image": PLATFORM_IMAGE,
        "imagePullPolicy": "Never",
        "command": ["python", "-m", "humanwork_dev.fakes", "--host", "0.0.0.0",
                    "--shopify-port", str(SHOPIFY_PORT), "--amazon-port", str(AMAZON_PORT),
                    "--shopify-url", f"{base}:{SHOPIFY_PORT}",
                    "--amazon-url", f"{base}:{AMAZON_PORT}", "--credentials", "-",
                    "--control-port", str(CONTROL_PORT)],
        "env": [{"name": "PYTHONPATH", "value": "/opt/fakes"}],
        "ports": [{"name": "shopify", "containerPort": SHOPIFY_PORT},
                  {"name": "amazon", "containerPort": AMAZON_PORT}],
        "readinessProbe": {"tcpSocket": {"port": AMAZON_PORT}, "periodSeconds": 1},
        "resources": {"requests": {"cpu": "10m", "memory": "64Mi"},
                      "limits": {"memory": "256Mi"}},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [{"name": "source", "mountPath": "/opt/fakes", "readOnly": True}],
    }  # fmt: skip
    volume = {"name": "source", "configMap": {"name": f"{FAKES}-source", "items": items}}
    meta = {"namespace": FAKES, "labels": labels}
    return [
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": {"name": FAKES, "labels": {
             "pod-security.kubernetes.io/enforce": "restricted", **labels}}},
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": f"{FAKES}-source", **meta}, "data": data},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": FAKES, **meta},
         "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                  "template": {"metadata": {"labels": labels},
                               "spec": _pod_spec([container], [volume])}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": FAKES, **meta},
         "spec": {"selector": labels, "ports": [
             {"name": "shopify", "port": SHOPIFY_PORT, "targetPort": SHOPIFY_PORT},
             {"name": "amazon", "port": AMAZON_PORT, "targetPort": AMAZON_PORT}]}},
    ]  # fmt: skip


def pki_dir(kubectl: Kubectl) -> Path:
    """Where the platform's CA of this cluster is kept (beside its kubeconfig)."""
    return Path(kubectl.kubeconfig).parent / "platform-pki"


def _apply(kubectl: Kubectl, items: list[dict[str, Any]]) -> None:
    manifest = {"apiVersion": "v1", "kind": "List", "items": items}
    kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=json.dumps(manifest))


@dataclass
class Helm:
    """helm (humanwork_dev/scripts/build-helm.sh: built once per machine, found at once
    after) on the cluster of one kubeconfig, its own state in a folder beside it."""

    path: str
    kubeconfig: str

    @classmethod
    def of(cls, kubectl: Kubectl) -> Helm:
        built = subprocess.run(["bash", str(HELM_SCRIPT)], capture_output=True, text=True,
                               check=False)  # fmt: skip
        if built.returncode != 0:
            raise InClusterError(f"no helm ({HELM_SCRIPT}): {built.stderr.strip()[-2000:]}")
        return cls(str(Path(built.stdout.strip().splitlines()[-1]) / "helm"), kubectl.kubeconfig)

    def __call__(self, *args: str) -> str:
        home = Path(self.kubeconfig).parent / "helm"
        env = {**os.environ, "KUBECONFIG": self.kubeconfig,
               "HELM_CACHE_HOME": str(home / "cache"), "HELM_CONFIG_HOME": str(home / "config"),
               "HELM_DATA_HOME": str(home / "data")}  # fmt: skip
        done = subprocess.run([self.path, *args], env=env, capture_output=True, text=True,
                              check=False, timeout=300)  # fmt: skip
        if done.returncode != 0:
            raise InClusterError(f"helm {' '.join(args[:2])} failed: {done.stderr.strip()}")
        return done.stdout


def render(helm: Helm) -> list[dict[str, Any]]:
    """The chart with the node's values as `helm template` renders it, the release's
    Namespace included (namespace.create: the install itself leaves it to the harness)."""
    out = helm("template", RELEASE, str(CHART), "--namespace", SYSTEM, "-f", str(VALUES),
               "--set", "namespace.create=true")  # fmt: skip
    return _documents(out)


def _install(helm: Helm, operator_env: dict[str, str]) -> int:
    """`helm upgrade --install` of the release with VALUES; `operator_env` is added to the
    operator's settings (`operator.env`), those an earlier deploy gave are kept
    (--reset-then-reuse-values). Returns the release's revision."""
    with tempfile.TemporaryDirectory() as folder:
        added = Path(folder) / "operator-env.json"  # a values file: merged with VALUES' map
        added.write_text(json.dumps({"operator": {"env": operator_env}}))
        out = helm("upgrade", "--install", RELEASE, str(CHART), "--namespace", SYSTEM,
                   "-f", str(VALUES), "-f", str(added), "--take-ownership",
                   "--reset-then-reuse-values", "--output", "json")  # fmt: skip
    return int(json.loads(out)["version"])


def _platform_secrets() -> dict[str, Any]:
    """The Secret humanwork-platform-secrets the chart's platform mounts (a user makes it):
    the literals of the dev overlay's generator of that name (its committed throwaway
    values), with its labels and annotations."""
    spec = yaml.safe_load((DEV_OVERLAY / "kustomization.yaml").read_text())
    found = [g for g in spec.get("secretGenerator") or []
             if g["name"] == "humanwork-platform-secrets"]  # fmt: skip
    if len(found) != 1:
        raise InClusterError(f"{DEV_OVERLAY}: no one generator of humanwork-platform-secrets")
    options = found[0].get("options") or {}
    meta = {
        "name": "humanwork-platform-secrets",
        "namespace": SYSTEM,
        "labels": options.get("labels") or {},
        "annotations": options.get("annotations") or {},
    }
    data = dict(literal.split("=", 1) for literal in found[0]["literals"])
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "Opaque",
            "stringData": data}  # fmt: skip


def _serving_certificate(kubectl: Kubectl, helm: Helm) -> Path:
    """Make the release's Namespace and the platform's Service (as the chart renders them),
    then its certificate for the Service's names and cluster address (reissued only when
    that address or the CA changed)."""
    there = kubectl("-n", SYSTEM, "get", "service", pki.PLATFORM_SERVICE, check=False)
    if there.returncode != 0:
        wanted = {("Namespace", SYSTEM), ("Service", pki.PLATFORM_SERVICE)}
        _apply(kubectl, [d for d in render(helm) if (d["kind"], d["metadata"]["name"]) in wanted])
    ip = kubectl.json("-n", SYSTEM, "get", "service", pki.PLATFORM_SERVICE)["spec"]["clusterIP"]
    authority = pki.platform_authority(pki_dir(kubectl))
    found = kubectl("-n", SYSTEM, "get", "secret", pki.TLS_SECRET, "-o", "json", check=False)
    issued = json.loads(found.stdout) if found.returncode == 0 else {}
    mark = f"{ip} {authority.ca.cert.read_text().strip()[-60:]}"
    if (issued.get("metadata", {}).get("annotations") or {}).get("humanwork.dev/issued") != mark:
        items = pki.platform_tls(authority, (ip,))
        items[0]["metadata"]["annotations"] = {"humanwork.dev/issued": mark}
        _apply(kubectl, items)
    return authority.ca.cert


def _documents(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def _harness_policies(kubectl: Kubectl) -> list[dict[str, Any]]:
    """NetworkPolicies added to the manifests' own: the operator and the platform reach the
    API server where this machine's listens, the platform reaches the fakes' Service."""
    slices = kubectl.json("-n", "default", "get", "endpointslices",
                          "-l", "kubernetes.io/service-name=kubernetes")["items"]  # fmt: skip
    to = [{"ipBlock": {"cidr": f"{a}/32"}} for s in slices for e in s.get("endpoints") or []
          for a in e["addresses"]]  # fmt: skip
    ports = [{"protocol": "TCP", "port": p["port"]} for s in slices for p in s.get("ports") or []]
    meta = {"namespace": SYSTEM, "labels": {"app.kubernetes.io/part-of": "humanwork-dev"}}
    selector = {"matchExpressions": [{"key": "app.kubernetes.io/name", "operator": "In",
                "values": ["humanwork-operator", "humanwork-platform-api"]}]}  # fmt: skip
    fakes = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": FAKES}}}
    return [
        {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
         "metadata": {"name": "humanwork-dev-api-server", **meta},
         "spec": {"podSelector": selector, "policyTypes": ["Egress"],
                  "egress": [{"to": to, "ports": ports}]}},
        {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
         "metadata": {"name": "humanwork-dev-fakes", **meta},
         "spec": {"podSelector": {"matchLabels": {"app.kubernetes.io/name": pki.PLATFORM_SERVICE}},
                  "policyTypes": ["Egress"],
                  "egress": [{"to": [fakes], "ports": [
                      {"protocol": "TCP", "port": SHOPIFY_PORT},
                      {"protocol": "TCP", "port": AMAZON_PORT}]}]}},
    ]  # fmt: skip


def deploy(
    kubectl: Kubectl, operator_env: dict[str, str] | None = None, timeout: float = 240.0
) -> Deployed:
    """Install or upgrade the chart's release with the node's values (`operator_env` added
    to the operator's settings: a changed one is a `helm upgrade` that rolls the operator
    out) and the fakes, wait until they serve; idempotent."""
    helm = Helm.of(kubectl)
    ca_file = _serving_certificate(kubectl, helm)
    _apply(kubectl, [_platform_secrets(), *_harness_policies(kubectl)])
    revision = _install(helm, operator_env or {})
    _apply(kubectl, fakes_manifests())
    for namespace, name in ((SYSTEM, "humanwork-operator"), (SYSTEM, "humanwork-platform-api"),
                            (FAKES, FAKES)):  # fmt: skip
        done = kubectl("-n", namespace, "rollout", "status", f"deployment/{name}",
                       f"--timeout={int(timeout)}s", check=False)  # fmt: skip
        if done.returncode != 0:
            pods = kubectl("-n", namespace, "get", "pods", "-o", "wide", check=False).stdout
            events = kubectl("-n", namespace, "get", "events", check=False).stdout[-3000:]
            raise InClusterError(f"{namespace}/{name} not ready: {done.stderr}\n{pods}\n{events}")
        _wait_old_pods_gone(kubectl, namespace, name, timeout)
    service = kubectl.json("-n", SYSTEM, "get", "service", "humanwork-platform-api")
    platform_url = f"https://{service['spec']['clusterIP']}:8000"
    _wait_http(f"{platform_url}/healthz", timeout, ssl.create_default_context(cafile=str(ca_file)))
    credentials = _fakes_credentials(kubectl, timeout)
    return Deployed(platform_url, _fakes_ip(kubectl), credentials, ca_file, revision)


def _wait_old_pods_gone(kubectl: Kubectl, namespace: str, app: str, timeout: float) -> None:
    """`rollout status` returns once the new pods are ready, while a pod of the previous
    rollout may still be terminating (the operator settles its handlers on SIGTERM); wait
    until none is left, so that exactly one operator runs when deploy returns."""
    deadline = time.monotonic() + timeout
    while True:
        pods = kubectl.json("-n", namespace, "get", "pods", "-l", f"app.kubernetes.io/name={app}")
        leaving = [p["metadata"]["name"] for p in pods["items"]
                   if p["metadata"].get("deletionTimestamp")]  # fmt: skip
        if not leaving:
            return
        if time.monotonic() > deadline:
            raise InClusterError(f"{namespace}: pods of a previous rollout still there: {leaving}")
        time.sleep(0.5)


def _fakes_ip(kubectl: Kubectl) -> str:
    pods = kubectl.json("-n", FAKES, "get", "pods", "-l", f"app.kubernetes.io/name={FAKES}")
    running = [p for p in pods["items"] if p["status"].get("phase") == "Running"]
    if not running:
        raise InClusterError("no running pod of the fake upstreams")
    return str(running[0]["status"]["podIP"])


def _fakes_credentials(kubectl: Kubectl, timeout: float) -> dict[str, dict[str, str]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        logs = kubectl("-n", FAKES, "logs", f"deployment/{FAKES}", check=False).stdout
        for line in logs.splitlines():
            if line.startswith("{"):
                found: dict[str, dict[str, str]] = json.loads(line)
                return found
        time.sleep(0.5)
    raise InClusterError("the fake upstreams printed no credentials")


def _wait_http(url: str, timeout: float, verify: ssl.SSLContext | bool = True) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=3, verify=verify).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise InClusterError(f"{url} did not answer 200 within {timeout:.0f}s")


def agent_scheduling() -> dict[str, Any]:
    """The AgentInstance fields that put its agent pods on the real node."""
    return {
        "nodeSelector": {node.LABEL[0]: node.LABEL[1]},
        "tolerations": [{"key": node.TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}],
    }


def undeploy(kubectl: Kubectl) -> None:
    """Remove the fakes and the product's Deployments (the release, CRDs and policies stay:
    the next deploy's `helm upgrade` makes the Deployments again)."""
    kubectl("delete", "namespace", FAKES, "--ignore-not-found", "--wait=false", check=False)
    kubectl("-n", SYSTEM, "delete", "deployment", "humanwork-operator", "humanwork-platform-api",
            "--ignore-not-found", check=False)  # fmt: skip
    kubectl("-n", SYSTEM, "delete", "networkpolicy", "humanwork-dev-api-server",
            "humanwork-dev-fakes", "--ignore-not-found", check=False)  # fmt: skip


# --- an org and its agent, as an admin makes them -----------------------------------------


@dataclass
class Org:
    """An org made through the platform, and its users' Authorization headers."""

    id: str
    namespace: str
    headers: dict[str, dict[str, str]]
    passwords: dict[str, str]


def login(http: httpx.Client, user: str, password: str) -> dict[str, str]:
    r = http.post("/auth/token", json={"username": user, "password": password})
    if r.status_code != 200:
        raise InClusterError(f"login of {user} refused: {r.status_code} {r.text}")
    return {"Authorization": f"Bearer {r.json()['access_token']}"}


def create_org(
    http: httpx.Client,
    slug: str,
    credentials: dict[str, dict[str, str]],
    users: tuple[str, ...] = ("expert", "requester"),
    admin_password: str = DEV_ADMIN_PASSWORD,
) -> Org:
    """The org `slug` through the platform API (`http` is a client on its URL): users with
    the role `operator` named `<user>-<slug>`, Shopify and Amazon enabled with the fakes'
    credentials."""
    admin = login(http, "admin", admin_password)
    r = http.post("/orgs", json={"slug": slug, "name": f"Acme ({slug})"}, headers=admin)
    if r.status_code != 201:
        raise InClusterError(f"org {slug} refused: {r.status_code} {r.text}")
    org = Org(r.json()["id"], f"org-{slug}", {}, {})
    for user in users:
        name, password = f"{user}-{slug}", f"pw-{user}-{slug}-{uuid.uuid4().hex[:12]}"
        doc = {"username": name, "password": password, "role": "operator", "org_ids": [org.id]}
        http.post("/users", json=doc, headers=admin).raise_for_status()
        org.headers[user], org.passwords[user] = login(http, name, password), password
    for tool in ("shopify", "amazon"):
        http.put(f"/orgs/{org.id}/tool-permissions/{tool}", json={"enabled": True},
                 headers=admin).raise_for_status()  # fmt: skip
        http.put(f"/orgs/{org.id}/integrations/{tool}", json={"credentials": credentials[tool]},
                 headers=admin).raise_for_status()  # fmt: skip
    return org


def agent_instance(org: Org) -> dict[str, Any]:
    """The org's AgentInstance `agent` for the real node (offline planner, no LLM), reading
    its LLM key from the Secret `llm`."""
    return {
        "apiVersion": "humanwork.io/v1alpha1",
        "kind": "AgentInstance",
        "metadata": {"name": "agent", "namespace": org.namespace},
        "spec": {
            "orgId": org.id,
            "specialist": {"name": "Ops", "systemPrompt": "You reconcile orders."},
            "model": "offline",
            "enabledTools": ["amazon", "shopify"],
            "llm": {"baseURL": "https://llm.example/v1",
                    "apiKeySecretRef": {"name": "llm", "key": "api-key"}},
            **agent_scheduling(),
        },
    }  # fmt: skip


def provision_agent(kubectl: Kubectl, org: Org, timeout: float = 180.0) -> None:
    """The org's AgentInstance `agent` on the real node, Ready."""
    kubectl("-n", org.namespace, "create", "secret", "generic", "llm",
            "--from-literal=api-key=none")  # fmt: skip
    kubectl("apply", "-f", "-", stdin=json.dumps(agent_instance(org)))
    kubectl("-n", org.namespace, "wait", "--for=jsonpath={.status.phase}=Ready",
            "agentinstance/agent", f"--timeout={int(timeout)}s")  # fmt: skip


def container_pid(state: Path, pod: dict[str, Any]) -> int:
    """The host PID of a pod's first container (the node's containerd task)."""
    cid = pod["status"]["containerStatuses"][0]["containerID"].split("://", 1)[1]
    for line in node._ctr(node.node_dir(state), "tasks", "ls").stdout.splitlines()[1:]:
        task, pid, *_ = line.split()
        if task == cid:
            return int(pid)
    raise InClusterError(f"no containerd task for {cid}")


def cgroup_memory(pid: int) -> dict[str, int]:
    """Memory of the container of `pid` and of its pod, in bytes, from the cgroup v1
    memory hierarchy (this machine's, see the node note): usage_in_bytes and the rss of
    memory.stat, for the container's cgroup and its parent (the pod's)."""
    lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    path = next(ln.split(":", 2)[2] for ln in lines if ln.split(":")[1] == "memory")
    container = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
    out: dict[str, int] = {}
    for prefix, folder in (("container", container), ("pod", container.parent)):
        out[f"{prefix}_usage"] = int((folder / "memory.usage_in_bytes").read_text())
        stat = dict(ln.split() for ln in (folder / "memory.stat").read_text().splitlines())
        out[f"{prefix}_rss"] = int(stat["total_rss"])
    return out
