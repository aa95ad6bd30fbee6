"""Archiving finished tasks: the platform's watch saves a task that reached a terminal
phase into `archived_tasks` and annotates it `humanwork.io/archived`; the operator removes
it after its TTL (3 s in the tests); the task endpoints then answer from the archive. A
platform that was down archives on its next start what finished meanwhile."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from kubernetes import client as kclient
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from humanwork_dev.processes import OperatorProcess
from platform_api.app import create_app
from platform_api.models import ArchivedTask
from platform_api.settings import Settings
from tests.conftest import Cluster
from tests.fixtures.stack import TASK_TTL_SECONDS
from tests.platform.conftest import Api
from tests.platform_k8s.conftest import Orgs, TaskApi, ticked, until

STEP = {"id": "only", "description": "Refund order 17", "tool": "shopify_refund", "risk": "high"}
EXPIRING = {"decisionDeadlineSeconds": 1, "escalation": {"maxEscalations": 0}, "onExpiry": "End"}


def resource(cluster: Cluster, task_id: str) -> dict[str, Any] | None:
    ns, name = task_id.split("/")
    try:
        found: dict[str, Any] = kclient.CustomObjectsApi(cluster.api).get_namespaced_custom_object(
            "humanwork.io", "v1alpha1", ns, "agentictasks", name
        )
    except kclient.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return found


async def rows(db: AsyncEngine, uid: str) -> list[ArchivedTask]:
    async with db.connect() as conn:
        found = await conn.execute(select(ArchivedTask).where(ArchivedTask.uid == uid))
        return list(found.all())  # type: ignore[arg-type]


async def test_a_finished_task_is_archived_removed_and_still_readable(
    tasks: TaskApi, orgs: Orgs, client: httpx.AsyncClient, cluster: Cluster, db: AsyncEngine
) -> None:
    made = await tasks.create(orgs.requester, orgs.org_a, steps=[STEP])
    open_task = await tasks.create(orgs.requester, orgs.org_a, steps=[STEP])
    await tasks.until(orgs.expert, made["id"], ticked)
    r = await tasks.decide(orgs.expert, made["id"], "only", "reject", {"feedback": "no"})
    assert r.status_code == 200, r.text

    # archived: the row, then the annotation
    async def archived_rows() -> list[Any]:
        return await rows(db, made["uid"])

    found = await until(archived_rows, lambda r: len(r) == 1)
    row = found[0]
    assert (row.phase, row.namespace, row.name) == ("Rejected", orgs.ns_a, made["name"])
    assert str(row.org_id) == orgs.org_a and row.requester == orgs.requester.username
    assert row.spec["steps"][0]["id"] == "only"
    assert row.status["steps"][0]["decision"]["feedback"] == "no"
    assert row.status["completedAt"]

    # ... then the operator removes it once its TTL passed
    async def gone() -> dict[str, Any] | None:
        return resource(cluster, made["id"])

    await until(gone, lambda r: r is None, within=TASK_TTL_SECONDS + 30)
    assert resource(cluster, open_task["id"]) is not None  # an open task is never archived
    assert await rows(db, open_task["uid"]) == []

    # the API answers it from the archive
    read = await tasks.get(orgs.viewer, made["id"])
    assert read.status_code == 200, read.text
    task = read.json()
    assert task["archived"] is True and task["uid"] == made["uid"]
    assert task["phase"] == "Rejected" and task["resource_version"] == ""
    assert task["status"]["steps"][0]["decision"]["verdict"] == "reject"
    assert task["spec"] == {**made["spec"], "policy": task["spec"]["policy"]}
    listed = (await client.get("/agentic/tasks", headers=orgs.viewer.headers)).json()
    assert listed["total"] == 2
    assert {(t["id"], t["archived"]) for t in listed["items"]} == {
        (made["id"], True),
        (open_task["id"], False),
    }
    rejected = await client.get(
        "/agentic/tasks", params={"status": "rejected"}, headers=orgs.viewer.headers
    )
    assert [t["id"] for t in rejected.json()["items"]] == [made["id"]]
    pending = await client.get(
        "/agentic/tasks", params={"status": "pending_approval"}, headers=orgs.viewer.headers
    )
    assert [t["id"] for t in pending.json()["items"]] == [open_task["id"]]
    detail = await client.get(f"/human-tasks/{made['id']}/only", headers=orgs.viewer.headers)
    assert detail.status_code == 200 and detail.json()["archived"] is True
    assert detail.json()["status"] == "decided"
    # still another org's business: 404
    other = await tasks.get(orgs.expert_b, made["id"])
    assert other.status_code == 404

    audit = await client.get(
        "/audit",
        params={"org": orgs.org_a, "action": "task.archived"},
        headers=orgs.admin_a.headers,
    )
    assert [row["target"] for row in audit.json()["items"]] == [f"agentictask:{made['id']}"]


async def test_a_restarted_platform_archives_what_finished_while_it_was_down(
    settings: Settings,
    operator: OperatorProcess,
    org_namespaces: list[str],
    cluster: Cluster,
    db: AsyncEngine,
) -> None:
    suffix = uuid.uuid4().hex[:6]
    first = create_app(settings)
    async with first.router.lifespan_context(first):
        transport = httpx.ASGITransport(app=first)
        async with httpx.AsyncClient(transport=transport, base_url="http://platform") as c:
            api = Api(c)
            root = await api.admin()
            org = await api.org(root, f"r-{suffix}")
            org_namespaces.append(f"org-r-{suffix}")
            runner = await api.user(root, f"runner-{suffix}", "operator", [org])
            made = await TaskApi(c).create(runner, org, steps=[STEP], policy=EXPIRING)

    # the platform is down; the task expires meanwhile (the operator alone does that)
    async def read() -> dict[str, Any] | None:
        return resource(cluster, made["id"])

    expired = await until(
        read, lambda r: r is not None and r.get("status", {}).get("phase") == "Expired"
    )
    assert "humanwork.io/archived" not in (expired["metadata"].get("annotations") or {})
    assert await rows(db, made["uid"]) == []

    second = create_app(settings)
    async with second.router.lifespan_context(second):

        async def archived() -> list[Any]:
            return await rows(db, made["uid"])

        found = await until(archived, lambda r: len(r) == 1)
        assert found[0].phase == "Expired"
        await until(read, lambda r: r is None, within=TASK_TTL_SECONDS + 30)
    async with db.connect() as conn:
        count = await conn.execute(
            text("select count(*) from audit_log where action = 'task.archived'")
        )
        assert count.scalar_one() == 1
