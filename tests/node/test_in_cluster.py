"""The product in-cluster on the real node: `helm install` of the chart
charts/humanwork-operator with humanwork_dev/node-values.yaml (the same objects as the
kustomize overlay `manifests/overlays/node`, the dev overlay pinned to the real node)
runs the operator and the platform API as pods from the images `make images` built; the
fake Shopify and Amazon run as a pod of their own. The seed's example below is the approval
end to end after `helm install`; a `helm upgrade` of the release (a changed operator
setting, the previous token's grace) then rolls the operator out, and the approvals of the
later tests run on the upgraded release.
An org is made through the platform's Service (its cluster address, from the host), its
AgentInstance by kubectl, and the agent runs as a container on the real node.

The seed's example then runs end to end, every hop over the pod network: the platform asks
the agent to plan (a signed command to the agent's Service), the expert approves, the agent
sees the approval through the API server and executes through the platform's tool proxy,
which calls the fakes' Service. A token rotation and a configuration change then reach the
running container through the kubelet's Secret and ConfigMap volume updates, without a
restart: the same container ID, restartCount 0, and the new token used (the old one is
refused once its grace is over).

Every hop to the platform is HTTPS: the agent verifies the platform against the CA its pod
is given by volume, refuses a platform its CA did not sign, follows a rotated CA without a
restart; plain HTTP to the platform's port gets no answer; the operator's and the
platform's own NetworkPolicies hold on the real node.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from humanwork_core.tokens import generate_signing_key
from humanwork_dev import incluster, node, pki
from humanwork_dev.fakes import catalog
from tests.conftest import Cluster
from tests.node.conftest import NODE_STATE, connects, container_pid, eventually, pod_manifest

pytestmark = pytest.mark.cluster

SEED_REQUEST = catalog.SEED_REQUEST
MUG = catalog.BY_SKU[catalog.DISCREPANT_SKU].inventory_item_id
FIX = {
    "action": "adjustInventoryLevel",
    "params": {
        "location_id": catalog.WAREHOUSE_LOCATION_ID,
        "inventory_item_id": MUG,
        "available_adjustment": -catalog.DISCREPANCY,
    },
}
GRACE_SECONDS = 5
"""The operator's grace for the previous token here (60 s by default)."""
TOKEN_FILE = "/var/run/humanwork/token/token"
PAUSE = "registry.k8s.io/pause:3.10"


class Org:
    """One org on the in-cluster platform (made by humanwork_dev.incluster), and its
    expert and requester (the requester of a task cannot approve it)."""

    def __init__(self, http: httpx.Client, made: incluster.Org) -> None:
        self.http, self.id, self.namespace = http, made.id, made.namespace
        self.passwords = made.passwords
        self.expert, self.requester = made.headers["expert"], made.headers["requester"]

    def task(self, name: str) -> dict[str, Any]:
        r = self.http.get(f"/agentic/tasks/{self.namespace}/{name}", headers=self.expert)
        assert r.status_code == 200, r.text
        found: dict[str, Any] = r.json()
        return found

    def until(self, name: str, check: Callable[[dict[str, Any]], bool], within: float = 90) -> Any:
        deadline = time.monotonic() + within
        while True:
            task = self.task(name)
            if check(task):
                return task
            assert time.monotonic() < deadline, json.dumps(task)[:3000]
            time.sleep(0.3)

    def plan(self) -> dict[str, Any]:
        r = self.http.post(f"/orgs/{self.id}/agents/agent/tasks", json={"request": SEED_REQUEST},
                           headers=self.requester, timeout=120)  # fmt: skip
        assert r.status_code == 201, r.text
        planned: dict[str, Any] = r.json()
        return planned


def state_of(task: dict[str, Any], step: str) -> str | None:
    for entry in (task.get("status") or {}).get("steps") or []:
        if entry["id"] == step:
            return (entry.get("execution") or {}).get("state")  # type: ignore[no-any-return]
    return None


GRACE_SETTING = "HUMANWORK_OPERATOR_PREVIOUS_TOKEN_GRACE_SECONDS"


@pytest.fixture(scope="module")
def product(cluster: Cluster, real_node: dict[str, Any]) -> Iterator[incluster.Deployed]:
    """`helm install` (`upgrade --install`) of the release with the node's values."""
    kubectl = incluster.Kubectl(cluster.kubectl_path, cluster.kubeconfig)
    yield incluster.deploy(kubectl)
    incluster.undeploy(kubectl)


@pytest.fixture(scope="module")
def upgraded(cluster: Cluster, product: incluster.Deployed, org: Org) -> incluster.Deployed:
    """`helm upgrade` of the same release with one operator setting changed (the previous
    token's grace, 60 s by default): returns once the operator's new pod is the only one."""
    kubectl = incluster.Kubectl(cluster.kubectl_path, cluster.kubeconfig)
    return incluster.deploy(kubectl, operator_env={GRACE_SETTING: str(GRACE_SECONDS)})


def helm_release_of(cluster: Cluster, name: str) -> tuple[str | None, str | None]:
    """Who manages the Deployment `name` of humanwork-system: its managed-by label and the
    Helm release its annotation names."""
    found = json.loads(cluster.kubectl("-n", "humanwork-system", "get", "deployment", name,
                                       "-o", "json").stdout)["metadata"]  # fmt: skip
    return (found.get("labels") or {}).get("app.kubernetes.io/managed-by"), (
        found.get("annotations") or {}
    ).get("meta.helm.sh/release-name")


def operator_env(cluster: Cluster) -> dict[str, str]:
    """The settings of the running operator pod's container (there is exactly one)."""
    pods = [p for p in pods_of(cluster, "humanwork-system", "humanwork-operator")
            if not p["metadata"].get("deletionTimestamp")]  # fmt: skip
    assert len(pods) == 1, [p["metadata"]["name"] for p in pods]
    env = pods[0]["spec"]["containers"][0]["env"]
    return {e["name"]: e.get("value", "") for e in env}


@pytest.fixture(scope="module")
def org(cluster: Cluster, product: incluster.Deployed) -> Iterator[Org]:
    """An org made through the platform's Service the way an admin makes one (users, tools
    pointed at the fakes' Service), and its AgentInstance on the real node (kubectl: the
    platform has no endpoint that creates one)."""
    kubectl = incluster.Kubectl(cluster.kubectl_path, cluster.kubeconfig)
    with httpx.Client(base_url=product.platform_url, timeout=60, verify=product.verify()) as http:
        made = incluster.create_org(http, f"node-{uuid.uuid4().hex[:6]}", product.credentials)
        incluster.provision_agent(kubectl, made)
        yield Org(http, made)
        cluster.kubectl("delete", "namespace", made.namespace, "--wait=false", check=False)


def pods_of(cluster: Cluster, namespace: str, app: str) -> list[dict[str, Any]]:
    selector = f"app.kubernetes.io/name={app}"
    found = cluster.kubectl("-n", namespace, "get", "pods", "-l", selector, "-o", "json")
    return list(json.loads(found.stdout)["items"])


def agent_pod(cluster: Cluster, namespace: str) -> dict[str, Any]:
    pods = pods_of(cluster, namespace, "humanwork-agent")
    running = [p for p in pods if p["status"].get("phase") == "Running"]
    assert len(running) == 1, [p["status"] for p in pods]
    return dict(running[0])


def in_agent(cluster: Cluster, namespace: str, code: str) -> str:
    """Run Python inside the running agent container (kubectl exec)."""
    pod = agent_pod(cluster, namespace)["metadata"]["name"]
    done = cluster.kubectl("-n", namespace, "exec", pod, "-c", "agent", "--", "python", "-c", code)
    return done.stdout.strip()


def inventory(product: incluster.Deployed) -> int:
    """The fake Shopify's stock of the discrepant item, asked from the host at its pod."""
    creds = product.credentials["shopify"]
    r = httpx.get(
        f"http://{product.fakes_ip}:{incluster.SHOPIFY_PORT}/admin/api/{creds['apiVersion']}"
        "/inventory_levels.json",
        params={"inventory_item_ids": MUG, "location_ids": catalog.WAREHOUSE_LOCATION_ID},
        headers={"X-Shopify-Access-Token": creds["accessToken"]},
    )
    assert r.status_code == 200, r.text
    return int(r.json()["inventory_levels"][0]["available"])


def test_the_seed_example_runs_end_to_end_with_everything_in_containers(
    cluster: Cluster, product: incluster.Deployed, org: Org
) -> None:
    """The approval end to end after `helm install`: the operator and the platform are the
    release's, on the real node."""
    for name in ("humanwork-operator", "humanwork-platform-api"):
        assert helm_release_of(cluster, name) == ("Helm", incluster.RELEASE), name
    assert product.revision >= 1
    for namespace, name in (("humanwork-system", "humanwork-operator"),
                            ("humanwork-system", "humanwork-platform-api"),
                            (incluster.FAKES, incluster.FAKES)):  # fmt: skip
        pods = pods_of(cluster, namespace, name)
        assert [p["spec"]["nodeName"] for p in pods] == ["humanwork-node-0"], name
    pod = agent_pod(cluster, org.namespace)
    assert pod["spec"]["nodeName"] == "humanwork-node-0"
    assert pod["status"]["containerStatuses"][0]["containerID"].startswith("containerd://")
    before = inventory(product)
    assert before == catalog.INVENTORY[(MUG, catalog.WAREHOUSE_LOCATION_ID)]

    planned = org.plan()
    name, (read, write) = planned["id"].rsplit("/", 1)[1], planned["steps"]
    assert (read["tool"], write["tool"]) == ("amazon", "shopify"), planned["steps"]
    time.sleep(1.5)
    assert state_of(org.task(name), read["id"]) is None  # nothing runs before a decision
    r = org.http.post(f"/agentic/tasks/{org.namespace}/{name}/steps/{read['id']}/approve",
                      json={}, headers=org.expert)  # fmt: skip
    assert r.status_code == 200, r.text
    task = org.until(name, lambda t: state_of(t, read["id"]) == "Succeeded")
    assert state_of(task, write["id"]) is None and inventory(product) == before
    r = org.http.post(f"/human-tasks/{org.namespace}/{name}/{write['id']}/resume",
                      json={"action": "edit", "parameters": FIX}, headers=org.expert)  # fmt: skip
    assert r.status_code == 200, r.text
    task = org.until(name, lambda t: (t.get("status") or {}).get("phase") == "Completed")
    assert state_of(task, write["id"]) == "Succeeded"
    assert inventory(product) == before - catalog.DISCREPANCY


def client_of(org: Org) -> dict[str, str]:
    """A user with the role `client` in the org, made by the platform admin; its headers."""
    http = org.http
    admin = incluster.login(http, "admin", incluster.DEV_ADMIN_PASSWORD)
    name, password = f"client-{org.namespace}", f"pw-client-{uuid.uuid4().hex[:12]}"
    doc = {"username": name, "password": password, "role": "client", "org_ids": [org.id]}
    r = http.post("/users", json=doc, headers=admin)
    assert r.status_code == 201, r.text
    return incluster.login(http, name, password)


def client_plan(org: Org, client: dict[str, str], cid: str, within: float = 180) -> Any:
    """The plan filed for conversation `cid`, as its client follows it, once the platform
    has recorded which steps the client confirms (a moment after the task is created; the
    tool proxy recomputes the same rule from trusted data, so nothing runs in between)."""
    deadline = time.monotonic() + within
    while True:
        r = org.http.get(f"/orgs/{org.id}/conversations/{cid}/tasks", headers=client)
        assert r.status_code == 200, r.text
        items = r.json()["items"]
        if items and any(step["confirmation"] for step in items[0]["steps"]):
            return items[0]
        assert time.monotonic() < deadline, f"no plan for {cid} within {within}s"
        time.sleep(0.5)


def test_a_clients_message_dispatches_itself_and_its_confirmation_releases_the_write(
    cluster: Cluster, product: incluster.Deployed, org: Org
) -> None:
    """The client's side with everything in containers: a client writes the seed's request
    and nobody presses a button; the plan it files waits for the expert; the write the expert
    approved still waits for the client, who confirms it; exactly one write reaches the fake
    Shopify and the conversation tells the client the request is complete."""
    client = client_of(org)
    before = inventory(product)
    r = org.http.post(f"/orgs/{org.id}/conversations", headers=client,
                      json={"subject": "October", "message": SEED_REQUEST})  # fmt: skip
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    planned = client_plan(org, client, cid)
    name, (read, write) = planned["name"], planned["steps"]
    assert (read["tool"], write["tool"]) == ("amazon", "shopify"), planned["steps"]
    assert write["confirmation"]["required"] and write["confirmation"]["state"] == "waiting"

    r = org.http.post(f"/agentic/tasks/{org.namespace}/{name}/steps/{read['id']}/approve",
                      json={}, headers=org.expert)  # fmt: skip
    assert r.status_code == 200, r.text
    org.until(name, lambda t: state_of(t, read["id"]) == "Succeeded", within=180)
    r = org.http.post(f"/human-tasks/{org.namespace}/{name}/{write['id']}/resume",
                      json={"action": "edit", "parameters": FIX}, headers=org.expert)  # fmt: skip
    assert r.status_code == 200, r.text
    # approved by the expert, the write still waits for the client: nothing is written
    shown = client_plan(org, client, cid)["steps"][1]
    assert shown["decision"] == "approved" and shown["execution"] == "not_started", shown
    assert state_of(org.task(name), write["id"]) is None and inventory(product) == before

    r = org.http.post(f"/orgs/{org.id}/tasks/{name}/steps/{write['id']}/confirm",
                      json={"step_hash": shown["confirmation"]["step_hash"]},
                      headers=client)  # fmt: skip
    assert r.status_code == 200, r.text
    task = org.until(name, lambda t: (t.get("status") or {}).get("phase") == "Completed",
                     within=180)  # fmt: skip
    assert state_of(task, write["id"]) == "Succeeded"
    assert inventory(product) == before - catalog.DISCREPANCY  # exactly one write
    r = org.http.get(f"/orgs/{org.id}/conversations/{cid}", headers=client)
    assert r.status_code == 200, r.text
    endings = [m["meta"].get("ending") for m in r.json()["messages"]
               if m["author_kind"] == "system" and (m.get("meta") or {}).get("task") == name
               and m["meta"].get("event") == "request_ended"]  # fmt: skip
    assert endings == ["completed"], r.json()["messages"]


def secret_token(cluster: Cluster, namespace: str) -> str:
    raw = cluster.kubectl("-n", namespace, "get", "secret", "agent-agent-token",
                          "-o", "jsonpath={.data.token}").stdout  # fmt: skip
    return base64.b64decode(raw).decode().strip()


def whoami(product: incluster.Deployed, token: str) -> int:
    r = httpx.get(f"{product.platform_url}/v1/agent-api/whoami", verify=product.verify(),
                  headers={"Authorization": f"Bearer {token}"})  # fmt: skip
    return r.status_code


def test_a_token_rotation_and_a_new_configuration_reach_the_running_container(
    cluster: Cluster, product: incluster.Deployed, upgraded: incluster.Deployed, org: Org
) -> None:
    """After `helm upgrade` of the release (the operator's previous-token grace shortened):
    the new revision's operator runs alone with the setting, and rotates, plans and
    executes an approved step with the agent the first one provisioned."""
    assert upgraded.revision == product.revision + 1
    assert operator_env(cluster).get(GRACE_SETTING) == str(GRACE_SECONDS)
    assert helm_release_of(cluster, "humanwork-operator") == ("Helm", incluster.RELEASE)
    ns = org.namespace
    first = agent_pod(cluster, ns)["status"]["containerStatuses"][0]
    old = secret_token(cluster, ns)
    assert in_agent(cluster, ns, f"print(open({TOKEN_FILE!r}).read().strip())") == old

    cluster.kubectl("-n", ns, "annotate", "agentinstance", "agent", "humanwork.io/rotate-token=now")
    assert eventually(lambda: secret_token(cluster, ns) != old, timeout=90), (
        "the operator did not rotate"
    )
    new = secret_token(cluster, ns)
    # the kubelet's Secret volume update: the file in the running container changes
    read = f"print(open({TOKEN_FILE!r}).read().strip())"
    assert eventually(lambda: in_agent(cluster, ns, read) == new, timeout=90), (
        "the volume was not updated"
    )
    # once the previous token's grace is over, only the new one is accepted ...
    assert eventually(lambda: whoami(product, old) == 401, timeout=GRACE_SECONDS + 30)
    assert whoami(product, new) == 200  # positive control
    # ... and the agent still plans and executes through the proxy: it uses the new one
    planned = org.plan()
    name, read_step = planned["id"].rsplit("/", 1)[1], planned["steps"][0]
    r = org.http.post(f"/agentic/tasks/{ns}/{name}/steps/{read_step['id']}/approve",
                      json={}, headers=org.expert)  # fmt: skip
    assert r.status_code == 200, r.text
    org.until(name, lambda t: state_of(t, read_step["id"]) == "Succeeded")

    # a configuration change: the operator's ConfigMap, then the kubelet's volume update
    before = json.loads(in_agent(cluster, ns, HEALTH))["configHash"]
    prompt = f"You reconcile orders, carefully ({uuid.uuid4().hex[:6]})."
    patch = {"spec": {"specialist": {"name": "Ops", "systemPrompt": prompt}}}
    cluster.kubectl("-n", ns, "patch", "agentinstance", "agent", "--type=merge",
                    "-p", json.dumps(patch))  # fmt: skip

    def applied() -> bool:
        status = json.loads(cluster.kubectl("-n", ns, "get", "agentinstance", "agent",
                                            "-o", "json").stdout)["status"]  # fmt: skip
        health = json.loads(in_agent(cluster, ns, HEALTH))
        return bool(
            health["configHash"] != before and health["configHash"] == status.get("configHash")
        )

    assert eventually(applied, timeout=90), "the new configuration did not reach the running agent"
    assert prompt in in_agent(cluster, ns, f"print(open({CONFIG_FILE!r}).read())")
    last = agent_pod(cluster, ns)["status"]["containerStatuses"][0]
    assert last["containerID"] == first["containerID"] and last["restartCount"] == 0


HEALTH = (
    "import urllib.request\n"
    "print(urllib.request.urlopen('http://127.0.0.1:8080/v1/health', timeout=5).read().decode())"
)
CONFIG_FILE = "/var/run/humanwork/config/config.json"
CONNECT = (
    "import socket, sys\n"
    "try: socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3).close()\n"
    "except OSError: print('closed')\n"
    "else: print('open')\n"
)


def test_from_inside_the_agent_the_operator_and_a_database_beside_the_platform_do_not_answer(
    cluster: Cluster, product: incluster.Deployed, org: Org
) -> None:
    """Item 5 (the rest of tests/node/test_agent_policy.py): from inside the running agent
    container, by `kubectl exec`. The node overlay's database is an SQLite file in the
    platform pod (no port); a database listening beside the platform API (a listener of
    ours on 5432 in the platform pod's own network namespace), the platform's metrics port
    and the operator's health and metrics ports do not answer, while the platform API on
    that same pod does. Each
    refusal's positive control: the same listener reached from the host."""
    ns = org.namespace
    pod = agent_pod(cluster, ns)["metadata"]["name"]

    def from_agent(host: str, port: int) -> str:
        args = [
            "-n",
            ns,
            "exec",
            pod,
            "-c",
            "agent",
            "--",
            "python",
            "-c",
            CONNECT,
            host,
            str(port),
        ]
        return cluster.kubectl(*args).stdout.strip()

    operator_ip = pods_of(cluster, "humanwork-system", "humanwork-operator")[0]["status"]["podIP"]
    platform = pods_of(cluster, "humanwork-system", "humanwork-platform-api")[0]
    platform_ip = platform["status"]["podIP"]
    listener = subprocess.Popen(
        ["nsenter", "-t", str(container_pid(platform)), "-n", sys.executable, "-m",
         "http.server", "5432", "--bind", platform_ip],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert eventually(lambda: connects(None, platform_ip, 5432), timeout=15)
        for port in (8080, 9090):  # the operator's health and metrics
            assert connects(None, operator_ip, port), f"positive control: operator {port}"
            assert from_agent(operator_ip, port) == "closed", f"the operator's {port} answers"
        assert from_agent(platform_ip, 5432) == "closed", "a database beside the platform answers"
        # the platform's metrics (9090, HUMANWORK_METRICS_PORT) are on the pod the agent
        # talks to, but not on the port it may reach
        assert connects(None, platform_ip, 9090), "positive control: platform metrics"
        assert from_agent(platform_ip, 9090) == "closed", "the platform's metrics answer"
        assert from_agent(platform_ip, 8000) == "open", "the platform API itself"
    finally:
        listener.kill()
        listener.wait()


# --- the platform's data outlives its pod -------------------------------------------------


def platform_pod(cluster: Cluster) -> dict[str, Any]:
    """The one Ready platform pod (none other, terminating or not)."""
    pods = pods_of(cluster, "humanwork-system", "humanwork-platform-api")
    assert len(pods) == 1, [(p["metadata"]["name"], p["status"].get("phase")) for p in pods]
    conds = {c["type"]: c["status"] for c in pods[0]["status"].get("conditions", [])}
    assert conds.get("Ready") == "True", pods[0]["status"]
    return pods[0]


def replaced(cluster: Cluster, old: dict[str, Any], timeout: float = 240) -> dict[str, Any]:
    """Wait until the pod `old` is gone and exactly one new platform pod is Ready."""

    def one_new_ready() -> bool:
        try:
            return bool(platform_pod(cluster)["metadata"]["uid"] != old["metadata"]["uid"])
        except AssertionError:
            return False

    assert eventually(one_new_ready, timeout=timeout), "no new platform pod became Ready"
    return platform_pod(cluster)


def database_file(cluster: Cluster, pod: dict[str, Any]) -> Path:
    """The platform's SQLite file on the host, wherever the pod's `data` volume is: the
    node's local PersistentVolume behind its claim, or the kubelet's folder of an emptyDir
    (a path through /proc/PID/root would not do: SQLite resolves that link to the host's
    root)."""
    data = next(v for v in pod["spec"]["volumes"] if v["name"] == "data")
    if "persistentVolumeClaim" in data:
        claim = data["persistentVolumeClaim"]["claimName"]
        pvc = json.loads(cluster.kubectl("-n", "humanwork-system", "get", "pvc", claim,
                                         "-o", "json").stdout)  # fmt: skip
        pv = json.loads(
            cluster.kubectl("get", "pv", pvc["spec"]["volumeName"], "-o", "json").stdout
        )
        return Path(pv["spec"]["local"]["path"]) / "platform.db"
    pods = node.node_dir(NODE_STATE) / "kubelet" / "pods"
    return (
        pods
        / pod["metadata"]["uid"]
        / "volumes"
        / "kubernetes.io~empty-dir"
        / "data"
        / "platform.db"
    )


@dataclass
class AuditCli:
    """`python -m platform_api.audit` from the host, on the SQLite file the platform pod
    has open, with checkpoints in a directory of the test's own and a signing key no
    database holds."""

    directory: Path
    key: Path

    def __call__(self, command: str, db: Path) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HUMANWORK_")}
        env |= {"HUMANWORK_AUDIT_CHECKPOINT_DIR": str(self.directory),
                "HUMANWORK_AUDIT_CHECKPOINT_KEY_FILE": str(self.key)}  # fmt: skip
        return subprocess.run(
            [sys.executable, "-m", "platform_api.audit", command,
             "--database-url", f"sqlite+aiosqlite:///{db}"],
            env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip


def audit_ids(http: httpx.Client, org_id: str, admin: dict[str, str]) -> list[str]:
    r = http.get("/audit", params={"org": org_id, "limit": 500}, headers=admin)
    assert r.status_code == 200, r.text
    return [item["id"] for item in r.json()["items"]]


def test_the_platform_keeps_its_data_when_its_pod_is_replaced(
    cluster: Cluster, product: incluster.Deployed, org: Org, tmp_path: Path
) -> None:
    """The embedded default keeps its data: the org, its users (signing in with the same
    passwords), its audit rows and the agent's registration survive the platform pod being
    deleted, then force-deleted (no grace: its process killed), and the audit chain still
    verifies against checkpoints signed before. On an emptyDir the new pod starts on an
    empty database and the sign-in is refused."""
    signing = generate_signing_key()
    (tmp_path / "key.pem").write_bytes(signing.to_pem())
    audit = AuditCli(tmp_path / "checkpoints", tmp_path / "key.pem")
    http, expert = org.http, f"expert-{org.namespace.removeprefix('org-')}"
    admin = incluster.login(http, "admin", incluster.DEV_ADMIN_PASSWORD)
    for enabled in (False, True):  # audit rows of the org's own, beside its creation's
        r = http.put(f"/orgs/{org.id}/tool-permissions/amazon", json={"enabled": enabled},
                     headers=admin)  # fmt: skip
        assert r.status_code == 200, r.text
    before = audit_ids(http, org.id, admin)
    assert len(before) >= 6, before
    pod = platform_pod(cluster)
    signed = audit("checkpoint", database_file(cluster, pod))
    assert signed.returncode == 0 and "signed" in signed.stdout, signed

    for how in (["--wait=true"], ["--grace-period=0", "--force"]):
        cluster.kubectl("-n", "humanwork-system", "delete", "pod", pod["metadata"]["name"], *how)
        pod = replaced(cluster, pod)
        incluster._wait_http(f"{product.platform_url}/healthz", 120, product.verify())
        headers = incluster.login(http, expert, org.passwords["expert"])  # the same password
        r = http.get(f"/orgs/{org.id}", headers=headers)
        assert r.status_code == 200 and r.json()["id"] == org.id, (how, r.text)
        admin = incluster.login(http, "admin", incluster.DEV_ADMIN_PASSWORD)
        after = audit_ids(http, org.id, admin)
        assert set(before) <= set(after), (how, sorted(set(before) - set(after)))
        verified = audit("verify", database_file(cluster, pod))
        assert verified.returncode == 0, (how, verified.stdout, verified.stderr)
        assert "matching their checkpoint" in verified.stdout, verified.stdout

    # the agent's org is still registered with the platform: a step plans, runs, succeeds
    org.expert = headers
    planned = org.plan()
    name, read = planned["id"].rsplit("/", 1)[1], planned["steps"][0]
    r = http.post(f"/agentic/tasks/{org.namespace}/{name}/steps/{read['id']}/approve",
                  json={}, headers=headers)  # fmt: skip
    assert r.status_code == 200, r.text
    org.until(name, lambda t: state_of(t, read["id"]) == "Succeeded")

    # where the data was: the node's local PersistentVolume, bound to the platform's claim
    assert (
        database_file(cluster, pod) == node.volume_dir(NODE_STATE, "platform-data") / "platform.db"
    )
    assert database_file(cluster, pod).is_file()


# --- encrypted in transit: the agent and the platform over TLS ---------------------------------

PLATFORM_HOST = "humanwork-platform-api.humanwork-system.svc"
AGENT_CA = "/var/run/humanwork/platform-ca/ca.crt"
FETCH = (
    "import asyncio, sys\n"
    "from pathlib import Path\n"
    "from agent_image.tls import platform_client\n"
    "async def main():\n"
    "    async with platform_client(Path(sys.argv[1])) as client:\n"
    "        try: print((await client.get(sys.argv[2], timeout=10)).status_code)\n"
    "        except Exception as exc: print(type(exc).__name__, exc)\n"
    "asyncio.run(main())\n"
)
PLAIN = (
    "import sys, urllib.request\n"
    "try: print(urllib.request.urlopen(sys.argv[1], timeout=10).status)\n"
    "except Exception as exc: print('refused', type(exc).__name__)\n"
)


def agent_exec(cluster: Cluster, namespace: str, *args: str) -> str:
    pod = agent_pod(cluster, namespace)["metadata"]["name"]
    done = cluster.kubectl("-n", namespace, "exec", pod, "-c", "agent", "--", *args)
    return done.stdout.strip()


def platform_log(cluster: Cluster) -> str:
    return cluster.kubectl("-n", "humanwork-system", "logs", "deployment/humanwork-platform-api",
                           "--tail=2000").stdout  # fmt: skip


def test_the_agent_reaches_the_platform_over_tls_only(
    cluster: Cluster, product: incluster.Deployed, org: Org, tmp_path: Any
) -> None:
    ns = org.namespace
    names = ["HUMANWORK_PLATFORM_URL", "HUMANWORK_PLATFORM_CA_FILE"]
    env = in_agent(cluster, ns, f"import os; print(' '.join(os.environ[n] for n in {names!r}))")
    assert env == f"https://{PLATFORM_HOST}:8000 {AGENT_CA}"
    shown = in_agent(cluster, ns, f"print(open({AGENT_CA!r}).read().strip())")
    assert shown == product.ca_file.read_text().strip()
    # plain HTTP to the platform's in-cluster port, from the agent's own pod (which the
    # NetworkPolicies let through): no HTTP answer, and the platform never sees the request
    plain, secure = f"/v1/plain-{uuid.uuid4().hex[:8]}", f"/v1/tls-{uuid.uuid4().hex[:8]}"
    out = agent_exec(cluster, ns, "python", "-c", PLAIN, f"http://{PLATFORM_HOST}:8000{plain}")
    assert out.startswith("refused"), out
    # positive control: the agent's own client, with the CA its pod was given, over HTTPS
    out = agent_exec(
        cluster, ns, "python", "-c", FETCH, AGENT_CA, f"https://{PLATFORM_HOST}:8000{secure}"
    )
    assert out == "404", out  # the platform answered (no such route)
    assert eventually(lambda: secure in platform_log(cluster), timeout=30)
    assert plain not in platform_log(cluster)
    # a CA that did not sign the platform's certificate: the agent's client refuses it
    wrong = pki.Authority(tmp_path / "wrong", name="not-the-platform-ca").ca.cert.read_text()
    agent_exec(cluster, ns, "python", "-c", f"open('/tmp/wrong-ca.crt','w').write({wrong!r})")
    out = agent_exec(cluster, ns, "python", "-c", FETCH, "/tmp/wrong-ca.crt",
                     f"https://{PLATFORM_HOST}:8000/healthz")  # fmt: skip
    assert "CERTIFICATE_VERIFY_FAILED" in out, out
    out = agent_exec(cluster, ns, "python", "-c", FETCH, AGENT_CA,
                     f"https://{PLATFORM_HOST}:8000/healthz")  # fmt: skip
    assert out == "200", out


def test_the_operator_and_the_platform_pods_take_only_their_own_traffic(
    cluster: Cluster,
    product: incluster.Deployed,
    org: Org,
    restricted_namespace: Callable[[str], str],
    run_pod: Callable[..., dict[str, Any]],
) -> None:
    """Their NetworkPolicies (manifests/base/*/networkpolicy.yaml), enforced on the real
    node: a pod of a namespace that is no org's reaches neither the platform's API port nor
    any port of the operator; a namespace labelled as the metrics scrapers' reaches the
    metrics ports only. Positive controls: the agent reaches the platform's API port (the
    TLS test above), the scraper its metrics ports."""
    outsider_ns, scraper_ns = restricted_namespace("outsider"), restricted_namespace("scraper")
    cluster.kubectl("label", "namespace", scraper_ns, "humanwork.io/metrics-scraper=true")
    outsider = container_pid(run_pod(outsider_ns, pod_manifest("outsider", PAUSE)))
    scraper = container_pid(run_pod(scraper_ns, pod_manifest("scraper", PAUSE)))
    operator_ip = pods_of(cluster, "humanwork-system", "humanwork-operator")[0]["status"]["podIP"]
    platform_ip = pods_of(cluster, "humanwork-system", "humanwork-platform-api")[0]["status"][
        "podIP"
    ]
    assert eventually(lambda: connects(scraper, operator_ip, 9090), timeout=30)
    assert connects(scraper, platform_ip, 9090), "positive control: the platform's metrics"
    assert connects(None, platform_ip, 8000), "positive control: the platform from the node"
    for port in (8000, 9090):
        assert not connects(outsider, platform_ip, port), f"an outsider reaches platform {port}"
    for port in (8080, 9090):
        assert not connects(outsider, operator_ip, port), f"an outsider reaches operator {port}"
    assert not connects(scraper, platform_ip, 8000), "a scraper reaches the platform's API"
    assert not connects(scraper, operator_ip, 8080), "a scraper reaches the operator's health"


# --- a node's pods evicted mid-step ------------------------------------------------------------

HOLD_SECONDS = 8.0
"""How long the fake Shopify holds its answer to an applied write: under the proxy's 10 s
timeout, so the platform's call succeeds while the agent that made it is gone."""


def fakes_control(product: incluster.Deployed, verb: str, **doc: Any) -> Any:
    """The fake Shopify's control port in its pod (humanwork_dev.fakes.control)."""
    url = f"http://{product.fakes_ip}:{incluster.CONTROL_PORT}/shopify/{verb}"
    r = httpx.post(url, json=doc) if doc or verb == "behave" else httpx.get(url)
    assert r.status_code == 200, r.text
    return r.json()


def write_task(org: Org) -> tuple[str, str]:
    """A one-step write (FIX) filed by the requester and approved by the expert; its name
    and the Idempotency-Key its step carries upstream."""
    body = {"orgId": org.id, "agentRef": "agent", "conversationId": str(uuid.uuid4()),
            "description": "Lower the mug at the warehouse",
            "steps": [{"id": "fix", "description": "Lower the mug", "kind": "action",
                       "tool": "shopify", "risk": "high", "parameters": FIX}]}  # fmt: skip
    r = org.http.post("/agentic/tasks", json=body, headers=org.requester)
    assert r.status_code == 201, r.text
    name = r.json()["id"].rsplit("/", 1)[1]
    r = org.http.post(f"/agentic/tasks/{org.namespace}/{name}/steps/fix/approve", json={},
                      headers=org.expert)  # fmt: skip
    assert r.status_code == 200, r.text
    return name, f"step:{org.task(name)['uid']}/fix"


def test_an_agent_evicted_mid_write_runs_it_once_and_its_replacement_finishes(
    cluster: Cluster, product: incluster.Deployed, org: Org
) -> None:
    """The node is drained of its agent pods (cordoned, each evicted through the Eviction
    API) while an approved write is in flight: the upstream applied it and holds its answer.
    The agent's replacement waits for the node (uncordoned), comes up, finds the step running
    and calls again with the same key: the ledger answers from the first call (or the outcome
    is unknown and an expert resolves it from the upstream). The upstream saw the write once,
    the approval is in the status, the task completes, the audit chains verify."""
    ns, node_name = org.namespace, "humanwork-node-0"
    old = agent_pod(cluster, ns)
    before, seen = inventory(product), len(fakes_control(product, "side-effects"))
    fakes_control(product, "misbehave", mode="late", seconds=HOLD_SECONDS)
    try:
        name, key = write_task(org)
        # the write reached the upstream, whose answer is held: the step is executing
        assert eventually(lambda: len(fakes_control(product, "side-effects")) > seen, 60)
        assert state_of(org.task(name), "fix") == "Running"
        began = time.monotonic()
        drained = cluster.kubectl("drain", node_name, "--pod-selector",
                                  "app.kubernetes.io/name=humanwork-agent", "--grace-period=1",
                                  "--ignore-daemonsets", "--delete-emptydir-data",
                                  "--timeout=60s")  # fmt: skip
        assert f"pod/{old['metadata']['name']} evicted" in drained.stdout, drained.stdout
    finally:
        cluster.kubectl("uncordon", node_name)
        fakes_control(product, "behave")

    def replaced() -> bool:
        pods = [p for p in pods_of(cluster, ns, "humanwork-agent")
                if p["metadata"]["uid"] != old["metadata"]["uid"]]  # fmt: skip
        conds = {c["type"]: c["status"] for p in pods for c in p["status"].get("conditions", [])}
        return len(pods) == 1 and conds.get("Ready") == "True"

    assert eventually(replaced, timeout=120), "no replacement agent pod became Ready"
    task = org.until(name, lambda t: state_of(t, "fix") in ("Succeeded", "OutcomeUnknown"), 120)
    if state_of(task, "fix") == "OutcomeUnknown":  # the expert reads the upstream, resolves
        applied = any(e["idempotencyKey"] == key for e in fakes_control(product, "side-effects"))
        r = org.http.post(f"/human-tasks/{ns}/{name}/fix/resolve", headers=org.expert,
                          json={"outcome": "applied" if applied else "not_applied"})  # fmt: skip
        assert r.status_code == 200, r.text
    task = org.until(name, lambda t: (t.get("status") or {}).get("phase") == "Completed", 120)
    print(f"recovered in {time.monotonic() - began:.1f}s after the drain")
    entry = next(e for e in task["status"]["steps"] if e["id"] == "fix")
    assert entry["decision"]["verdict"] == "approve"  # the approval answered 2xx is there
    effects = fakes_control(product, "side-effects")[seen:]
    assert [e["idempotencyKey"] for e in effects] == [key], effects  # once, and nothing else
    assert inventory(product) == before - catalog.DISCREPANCY
    verified = subprocess.run(
        [sys.executable, "-m", "platform_api.audit", "verify", "--database-url",
         f"sqlite+aiosqlite:///{database_file(cluster, platform_pod(cluster))}"],
        env={k: v for k, v in os.environ.items() if not k.startswith("HUMANWORK_")},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert verified.returncode == 0 and "every chain intact" in verified.stdout, verified


def test_a_rotated_ca_reaches_the_running_agent_without_a_restart(
    cluster: Cluster, product: incluster.Deployed, org: Org, tmp_path: Any
) -> None:
    """The platform team rotates the CA: the ConfigMap humanwork-platform-ca holds only a
    new CA, then the serving certificate is re-issued by it. The operator copies the new
    bundle into the agent's ConfigMap, the kubelet updates the running container's file, the
    agent reads it before its next request (its log says so) and works on over TLS verified
    by the new CA alone: a plan and an approved read run through the platform, same container,
    no restart. Last in this module: it puts the harness's CA back at the end."""
    ns = org.namespace
    first = agent_pod(cluster, ns)["status"]["containerStatuses"][0]
    new = pki.Authority(tmp_path / "rotated", name="humanwork-rotated-ca")
    bundle = tmp_path / "both.crt"
    bundle.write_text(product.ca_file.read_text() + new.ca.cert.read_text())
    host = ssl.create_default_context(cafile=str(bundle))  # the host trusts both meanwhile
    system = ["-n", "humanwork-system"]
    ca_map = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": "humanwork-platform-ca", "namespace": "humanwork-system"},
              "data": {"ca.crt": new.ca.cert.read_text()}}  # fmt: skip
    try:
        cluster.kubectl(*system, "apply", "--server-side", "--force-conflicts", "-f", "-",
                        stdin=json.dumps(ca_map))  # fmt: skip
        read = f"print(open({AGENT_CA!r}).read().strip())"
        assert eventually(lambda: in_agent(cluster, ns, read) == new.ca.cert.read_text().strip(),
                          timeout=300), "the new CA did not reach the agent's volume"  # fmt: skip
        # the platform's certificate, re-issued by the new CA
        (secret, _) = pki.platform_tls(new, (product.platform_url.split("//")[1].split(":")[0],))
        cluster.kubectl(*system, "apply", "--server-side", "--force-conflicts", "-f", "-",
                        stdin=json.dumps(secret))  # fmt: skip

        def served_by_new() -> bool:
            try:
                context = ssl.create_default_context(cafile=str(new.ca.cert))
                return (
                    httpx.get(f"{product.platform_url}/healthz", verify=context).status_code == 200
                )
            except httpx.HTTPError:
                return False

        assert eventually(served_by_new, timeout=300), "the platform did not serve the new cert"
        with httpx.Client(base_url=product.platform_url, timeout=60, verify=host) as http:
            users = {"expert": org.expert, "requester": org.requester}
            rotated = Org(http, incluster.Org(org.id, ns, users, {}))
            planned = rotated.plan()
            name, step = planned["id"].rsplit("/", 1)[1], planned["steps"][0]
            r = http.post(f"/agentic/tasks/{ns}/{name}/steps/{step['id']}/approve", json={},
                          headers=org.expert)  # fmt: skip
            assert r.status_code == 200, r.text
            rotated.until(name, lambda t: state_of(t, step["id"]) == "Succeeded", within=180)
        last = agent_pod(cluster, ns)["status"]["containerStatuses"][0]
        assert last["containerID"] == first["containerID"] and last["restartCount"] == 0
        # the running agent read the new bundle (it reads its file before a request): its
        # log names the digest of the file the kubelet wrote
        digest = in_agent(cluster, ns, f"import hashlib; print(hashlib.sha256(open("
                          f"{AGENT_CA!r}, 'rb').read()).hexdigest()[:12])")  # fmt: skip
        logs = ["-n", ns, "logs", agent_pod(cluster, ns)["metadata"]["name"], "-c", "agent"]
        loaded = [line for line in cluster.kubectl(*logs).stdout.splitlines()
                  if "platform CA loaded from" in line]  # fmt: skip
        assert loaded and loaded[-1].endswith(f"(sha256 {digest})"), loaded
    finally:
        kubectl = incluster.Kubectl(cluster.kubectl_path, cluster.kubeconfig)
        kubectl(*system, "delete", "secret", pki.TLS_SECRET, "--ignore-not-found")
        incluster.deploy(kubectl)  # the harness's CA and certificate again
