"""`POST /orgs` with Kubernetes configured creates the org's namespace, labelled, under the
platform's own identity; without Kubernetes the task endpoints answer 503."""

from __future__ import annotations

import uuid

import httpx
from kubernetes import client as kclient

from platform_api.app import create_app
from tests.conftest import Cluster
from tests.platform.conftest import Api, make_settings


async def test_creating_an_org_creates_its_labelled_namespace(
    api: Api, cluster: Cluster, org_namespaces: list[str]
) -> None:
    root = await api.admin()
    slug = f"ns-{uuid.uuid4().hex[:6]}"
    org_namespaces.append(f"org-{slug}")
    org_id = await api.org(root, slug)
    ns = kclient.CoreV1Api(cluster.api).read_namespace(f"org-{slug}")
    assert ns.metadata.labels["humanwork.io/org-id"] == org_id
    assert ns.metadata.labels["pod-security.kubernetes.io/enforce"] == "restricted"
    # every label the operator would otherwise add (a write per org) is already there
    assert ns.metadata.labels["pod-security.kubernetes.io/enforce-version"] == "latest"
    assert ns.metadata.labels["pod-security.kubernetes.io/warn"] == "restricted"
    assert ns.metadata.labels["pod-security.kubernetes.io/audit"] == "restricted"
    fields = {m.manager for m in ns.metadata.managed_fields}
    assert "humanwork-platform-api" in fields


async def test_a_namespace_of_another_org_is_a_conflict_and_no_org_is_made(
    api: Api, client: httpx.AsyncClient, cluster: Cluster, org_namespaces: list[str]
) -> None:
    root = await api.admin()
    slug = f"ns-{uuid.uuid4().hex[:6]}"
    org_namespaces.append(f"org-{slug}")
    kclient.CoreV1Api(cluster.api).create_namespace(
        kclient.V1Namespace(
            metadata=kclient.V1ObjectMeta(
                name=f"org-{slug}", labels={"humanwork.io/org-id": str(uuid.uuid4())}
            )
        )
    )
    r = await client.post("/orgs", json={"slug": slug, "name": "Taken"}, headers=root.headers)
    assert r.status_code == 409 and r.json()["code"] == "conflict", r.text
    listed = await client.get("/orgs", headers=root.headers)
    assert slug not in {o["slug"] for o in listed.json()}
    labels = kclient.CoreV1Api(cluster.api).read_namespace(f"org-{slug}").metadata.labels
    assert "pod-security.kubernetes.io/enforce" not in labels  # left as it was


async def test_without_kubernetes_the_task_endpoints_answer_503(database_url: str) -> None:
    app = create_app(make_settings(database_url))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://platform") as c:
            api = Api(c)
            root = await api.admin()
            org_id = await api.org(root, "offline")  # the rest of the API works
            calls = [
                c.get("/agentic/tasks", headers=root.headers),
                c.get("/agentic/tasks/org-offline/task-x", headers=root.headers),
                c.post(
                    "/agentic/tasks",
                    json={"orgId": org_id, "agentRef": "a", "description": "d", "steps": []},
                    headers=root.headers,
                ),
                c.post("/agentic/tasks/org-offline/task-x/steps/s/approve", headers=root.headers),
                c.get("/human-tasks", headers=root.headers),
                c.post(
                    "/human-tasks/org-offline/task-x/s/resume",
                    json={"action": "approve"},
                    headers=root.headers,
                ),
                c.post(
                    "/agentic/tasks/org-offline/task-x/steps/s/reject",
                    json={"feedback": "no"},
                    headers=root.headers,
                ),
            ]
            for call in calls:
                r = await call
                assert r.status_code == 503, r.text
                assert r.json()["code"] == "kubernetes_unavailable"
            r = await c.get("/agentic/tasks")
            assert r.status_code == 401  # authentication still comes first


async def test_the_task_endpoints_are_documented(database_url: str) -> None:
    app = create_app(make_settings(database_url))
    doc = app.openapi()
    ops = {
        ("post", "/agentic/tasks"): {"503"},
        ("get", "/agentic/tasks"): {"503"},
        ("get", "/agentic/tasks/{namespace}/{name}"): {"404", "503"},
        ("post", "/agentic/tasks/{namespace}/{name}/steps/{step_id}/approve"): {"409", "410"},
        ("post", "/agentic/tasks/{namespace}/{name}/steps/{step_id}/reject"): {"409", "410"},
        ("get", "/human-tasks"): {"503"},
        ("post", "/human-tasks/{namespace}/{name}/{step_id}/resume"): {"409", "410"},
    }
    codes = {"409": "run_state_conflict", "410": "human_task_expired"}
    for (method, path), statuses in ops.items():
        op = doc["paths"][path][method]
        assert op["summary"] and op["description"], path
        for status in statuses:
            example = op["responses"][status]["content"]["application/json"]["example"]
            if status in codes:
                assert example["code"] == codes[status], (path, status)
            if status == "503":
                assert example["code"] == "kubernetes_unavailable", path
