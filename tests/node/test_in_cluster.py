"""The product in-cluster on the real node (issue 13, item 4): `manifests/overlays/node`
(the dev overlay pinned to the real node) runs the operator and the platform API as pods
from the images `make images` built; the fake Shopify and Amazon run as a pod of their own.
An org is made through the platform's Service (its cluster address, from the host), its
AgentInstance by kubectl, and the agent runs as a container on the real node.

The seed's example then runs end to end, every hop over the pod network: the platform asks
the agent to plan (a signed command to the agent's Service), the expert approves, the agent
sees the approval through the API server and executes through the platform's tool proxy,
which calls the fakes' Service. A token rotation and a configuration change then reach the
running container through the kubelet's Secret and ConfigMap volume updates, without a
restart: the same container ID, restartCount 0, and the new token used (the old one is
refused once its grace is over).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from humanwork_dev import incluster
from humanwork_dev.fakes import catalog
from tests.conftest import Cluster

pytestmark = pytest.mark.cluster

SEED_REQUEST = (
    "Reconcile all Amazon orders for October and update inventory in Shopify for any discrepancies"
)
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


class Org:
    """One org on the in-cluster platform, and what its users hold."""

    def __init__(self, http: httpx.Client, slug: str, org_id: str) -> None:
        self.http, self.slug, self.id = http, slug, org_id
        self.namespace = f"org-{slug}"
        self.expert: dict[str, str] = {}
        self.requester: dict[str, str] = {}

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


def login(http: httpx.Client, user: str, password: str) -> dict[str, str]:
    r = http.post("/auth/token", json={"username": user, "password": password})
    assert r.status_code == 200, r.text
    return {"Authorization": f"Bearer {r.json()['access_token']}"}


@pytest.fixture(scope="module")
def product(cluster: Cluster, real_node: dict[str, Any]) -> Iterator[incluster.Deployed]:
    kubectl = incluster.Kubectl(cluster.kubectl_path, cluster.kubeconfig)
    env = {"HUMANWORK_OPERATOR_PREVIOUS_TOKEN_GRACE_SECONDS": str(GRACE_SECONDS)}
    yield incluster.deploy(kubectl, operator_env=env)
    incluster.undeploy(kubectl)


@pytest.fixture(scope="module")
def org(cluster: Cluster, product: incluster.Deployed) -> Iterator[Org]:
    """An org made through the platform's Service the way an admin makes one, its expert,
    its tools pointed at the fakes' Service, and its AgentInstance on the real node."""
    with httpx.Client(base_url=product.platform_url, timeout=60) as http:
        admin = login(http, "admin", incluster.DEV_ADMIN_PASSWORD)
        slug = f"node-{uuid.uuid4().hex[:6]}"
        r = http.post("/orgs", json={"slug": slug, "name": "Acme"}, headers=admin)
        assert r.status_code == 201, r.text
        org = Org(http, slug, r.json()["id"])
        for user in ("expert", "requester"):  # the requester of a task cannot approve it
            username, password = f"{user}-{slug}", f"pw-{user}-{slug}-0123456789"
            user_doc = {"username": username, "password": password, "role": "operator",
                        "org_ids": [org.id]}  # fmt: skip
            r = http.post("/users", json=user_doc, headers=admin)
            assert r.status_code == 201, r.text
            setattr(org, user, login(http, username, password))
        for tool in ("shopify", "amazon"):
            r = http.put(f"/orgs/{org.id}/tool-permissions/{tool}", json={"enabled": True},
                         headers=admin)  # fmt: skip
            assert r.status_code == 200, r.text
            creds = {"credentials": product.credentials[tool]}
            r = http.put(f"/orgs/{org.id}/integrations/{tool}", json=creds, headers=admin)
            assert r.status_code in (200, 201), r.text
        cluster.kubectl("-n", org.namespace, "create", "secret", "generic", "llm",
                        "--from-literal=api-key=none")  # fmt: skip
        instance = {
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
                **incluster.agent_scheduling(),
            },
        }  # fmt: skip
        cluster.kubectl("apply", "-f", "-", stdin=json.dumps(instance))
        cluster.kubectl("-n", org.namespace, "wait", "--for=jsonpath={.status.phase}=Ready",
                        "agentinstance/agent", "--timeout=180s")  # fmt: skip
        yield org
        cluster.kubectl("delete", "namespace", org.namespace, "--wait=false", check=False)


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
