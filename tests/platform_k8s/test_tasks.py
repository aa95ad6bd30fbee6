"""`/agentic/tasks` on the real control plane and PostgreSQL, the platform acting as its
own ServiceAccount (so its RBAC and the admission policies apply) and the operator
running (deadlines, phases)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
from kubernetes import client as kclient
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from platform_api.floor.audit.service import verify
from tests.conftest import Cluster
from tests.platform.conftest import Api
from tests.platform_k8s.conftest import Orgs, TaskApi, ticked


async def test_create_read_and_list(
    tasks: TaskApi, orgs: Orgs, client: httpx.AsyncClient, cluster: Cluster
) -> None:
    made = await tasks.create(orgs.requester, orgs.org_a)
    assert made["namespace"] == orgs.ns_a and made["id"] == f"{orgs.ns_a}/{made['name']}"
    assert made["spec"]["requestedBy"] == orgs.requester.username
    assert made["spec"]["orgId"] == orgs.org_a
    assert [s["id"] for s in made["spec"]["steps"]] == ["read", "write"]
    assert set(made["step_hashes"]) == {"read", "write"}

    raw = kclient.CustomObjectsApi(cluster.api).get_namespaced_custom_object(
        "humanwork.io", "v1alpha1", orgs.ns_a, "agentictasks", made["name"]
    )
    assert raw["metadata"]["uid"] == made["uid"]
    assert raw["spec"]["agentRef"] == {"name": "shop"}

    task = await tasks.until(orgs.viewer, made["id"], ticked)
    assert task["phase"] == "PendingApproval" and task["current_step"] == "read"
    assert task["highest_pending_risk"] == "critical"

    other = await tasks.create(orgs.requester, orgs.org_a, description="Second plan")
    r = await client.get("/agentic/tasks", headers=orgs.viewer.headers)
    assert r.status_code == 200, r.text
    page = r.json()
    assert page["total"] == 2
    assert {t["id"] for t in page["items"]} == {other["id"], made["id"]}
    created = [t["created_at"] for t in page["items"]]
    assert created == sorted(created, reverse=True)  # newest first
    pages = [
        await client.get(
            "/agentic/tasks",
            params={"org_id": orgs.org_a, "limit": 1, "offset": offset},
            headers=orgs.viewer.headers,
        )
        for offset in (0, 1)
    ]
    assert [p.json()["total"] for p in pages] == [2, 2]
    assert [t["id"] for p in pages for t in p.json()["items"]] == [t["id"] for t in page["items"]]

    await tasks.until(orgs.viewer, other["id"], ticked)
    ok = await tasks.decide(orgs.expert, made["id"], "read", "reject", {"feedback": "no"})
    assert ok.status_code == 200, ok.text
    await tasks.until(orgs.viewer, made["id"], lambda t: t["phase"] == "Rejected")
    pending = await client.get(
        "/agentic/tasks", params={"status": "pending_approval"}, headers=orgs.viewer.headers
    )
    assert [t["id"] for t in pending.json()["items"]] == [other["id"]]
    rejected = await client.get(
        "/agentic/tasks", params={"status": "rejected"}, headers=orgs.viewer.headers
    )
    assert [t["id"] for t in rejected.json()["items"]] == [made["id"]]
    bad = await client.get(
        "/agentic/tasks", params={"status": "sleeping"}, headers=orgs.viewer.headers
    )
    assert bad.status_code == 422


async def test_creating_needs_run_control_and_a_valid_plan(
    tasks: TaskApi, orgs: Orgs, client: httpx.AsyncClient
) -> None:
    body = {"orgId": orgs.org_a, "agentRef": "shop", "description": "d", "steps": PLAN_STEPS}
    r = await client.post("/agentic/tasks", json=body, headers=orgs.viewer.headers)
    assert r.status_code == 403 and r.json()["code"] == "forbidden"
    bad_step = {**PLAN_STEPS[0], "risk": "extreme"}
    r = await client.post(
        "/agentic/tasks", json={**body, "steps": [bad_step]}, headers=orgs.requester.headers
    )
    assert r.status_code == 422 and r.json()["code"] == "validation_failed"
    r = await client.post(
        "/agentic/tasks",
        json={**body, "policy": {"autoApprove": ["critical"]}},
        headers=orgs.requester.headers,
    )
    assert r.status_code == 422 and r.json()["code"] == "validation_failed"
    listed = await client.get("/agentic/tasks", headers=orgs.viewer.headers)
    assert listed.json()["total"] == 0


PLAN_STEPS: list[dict[str, Any]] = [
    {"id": "only", "description": "Refund order 17", "tool": "shopify_refund", "risk": "high"}
]


async def test_approve_then_the_rules_of_the_flow(
    tasks: TaskApi, orgs: Orgs, client: httpx.AsyncClient
) -> None:
    made = await tasks.create(orgs.requester, orgs.org_a)
    task = await tasks.until(orgs.expert, made["id"], ticked)

    # not the current step
    r = await tasks.decide(orgs.expert, made["id"], "write")
    assert r.status_code == 409, r.text
    assert r.json()["code"] == "run_state_conflict"
    assert r.json()["details"]["reason"] == "step_not_decidable"
    # the requester cannot approve its own step
    r = await tasks.decide(orgs.requester, made["id"], "read")
    assert r.status_code == 403 and r.json()["code"] == "self_approval_forbidden", r.text
    # a viewer cannot decide; a stale step hash is refused
    r = await tasks.decide(orgs.viewer, made["id"], "read")
    assert r.status_code == 403 and r.json()["code"] == "forbidden"
    r = await tasks.decide(orgs.expert, made["id"], "read", body={"stepHash": "0" * 64})
    assert r.status_code == 409 and r.json()["code"] == "step_hash_mismatch"
    # reject needs feedback
    r = await tasks.decide(orgs.expert, made["id"], "read", "reject", {})
    assert r.status_code == 422 and r.json()["code"] == "validation_failed"

    key = uuid.uuid4().hex
    body = {"stepHash": task["step_hashes"]["read"], "feedback": "fine"}
    r = await tasks.decide(orgs.expert, made["id"], "read", body=body, key=key)
    assert r.status_code == 200, r.text
    out = r.json()
    assert (out["decided"], out["approvals"], out["required_approvals"]) == (True, 1, 1)
    assert out["replayed"] is False and out["idempotency_key"] == key
    decision = out["task"]["status"]["steps"][0]["decision"]
    assert decision["by"] == orgs.expert.username and decision["idempotencyKey"] == key
    assert decision["stepHash"] == task["step_hashes"]["read"]

    # a retry with the same key replays: same decision, nothing written twice
    again = await tasks.decide(orgs.expert, made["id"], "read", body=body, key=key)
    assert again.status_code == 200 and again.json()["replayed"] is True
    assert again.json()["task"]["status"]["steps"][0]["decision"] == decision
    # the same key for something else is refused
    other = await tasks.decide(orgs.expert, made["id"], "read", body={"feedback": "x"}, key=key)
    assert other.status_code == 422 and other.json()["code"] == "idempotency_conflict"
    # already decided
    r = await tasks.decide(orgs.expert2, made["id"], "read")
    assert r.status_code == 409 and r.json()["code"] == "run_state_conflict"
    assert r.json()["details"]["reason"] == "step_already_decided"

    after = await tasks.until(orgs.expert, made["id"], lambda t: t["phase"] == "InProgress")
    assert after["status"]["steps"][0]["decision"] == decision

    audit = await client.get(
        "/audit",
        params={"org": orgs.org_a, "action": "task.step.approve"},
        headers=orgs.admin_a.headers,
    )
    assert audit.status_code == 200, audit.text
    rows = audit.json()["items"]
    assert len(rows) == 1
    row = rows[0]
    assert row["actor"] == orgs.expert.username and row["target"] == f"agentictask:{made['id']}"
    assert row["details"]["idempotency_key"] == key and row["details"]["step_id"] == "read"
    assert row["details"]["at"] and row["outcome"] == "success"
    refused = await client.get(
        "/audit",
        params={"org": orgs.org_a, "action": "task.step.self_approval"},
        headers=orgs.admin_a.headers,
    )
    assert [(r["actor"], r["outcome"]) for r in refused.json()["items"]] == [
        (orgs.requester.username, "denied")
    ]


async def test_a_critical_step_needs_two_distinct_experts(
    tasks: TaskApi, orgs: Orgs, api: Api, cluster: Cluster
) -> None:
    made = await tasks.create(
        orgs.requester, orgs.org_a, steps=[{**PLAN_STEPS[0], "risk": "critical"}]
    )
    await tasks.until(orgs.expert, made["id"], ticked)
    first = await tasks.decide(orgs.expert, made["id"], "only")
    assert first.status_code == 200, first.text
    assert (first.json()["decided"], first.json()["approvals"]) == (False, 1)
    assert first.json()["required_approvals"] == 2
    twice = await tasks.decide(orgs.expert, made["id"], "only")
    assert twice.status_code == 409 and twice.json()["code"] == "duplicate_approver"
    second = await tasks.decide(orgs.expert2, made["id"], "only")
    assert second.status_code == 200, second.text
    assert (second.json()["decided"], second.json()["approvals"]) == (True, 2)
    raw = kclient.CustomObjectsApi(cluster.api).get_namespaced_custom_object(
        "humanwork.io", "v1alpha1", orgs.ns_a, "agentictasks", made["name"]
    )
    entry = raw["status"]["steps"][0]
    assert [a["by"] for a in entry["approvals"]] == [orgs.expert.username, orgs.expert2.username]
    assert entry["decision"]["by"] == orgs.expert2.username
    managers = {m["manager"] for m in raw["metadata"]["managedFields"]}
    assert "humanwork-platform-api" in managers


async def test_twenty_experts_at_once_make_one_decision(
    tasks: TaskApi,
    orgs: Orgs,
    api: Api,
    client: httpx.AsyncClient,
    cluster: Cluster,
    db: AsyncEngine,
) -> None:
    root = await api.admin()
    experts = [
        await api.user(root, f"x{i}-{uuid.uuid4().hex[:6]}", "expert", [orgs.org_a])
        for i in range(20)
    ]
    made = await tasks.create(orgs.requester, orgs.org_a)
    await tasks.until(orgs.expert, made["id"], ticked)

    answers = await asyncio.gather(
        *(tasks.decide(expert, made["id"], "read") for expert in experts)
    )
    statuses = sorted(r.status_code for r in answers)
    assert statuses == [200] + [409] * 19, [r.text for r in answers]
    assert {r.json()["code"] for r in answers if r.status_code == 409} == {"run_state_conflict"}
    winner = next(r.json() for r in answers if r.status_code == 200)["task"]
    by = winner["status"]["steps"][0]["decision"]["by"]

    raw = kclient.CustomObjectsApi(cluster.api).get_namespaced_custom_object(
        "humanwork.io", "v1alpha1", orgs.ns_a, "agentictasks", made["name"]
    )
    entry = next(s for s in raw["status"]["steps"] if s["id"] == "read")
    assert entry["decision"]["by"] == by
    assert [a["by"] for a in entry["approvals"]] == [by]
    audit = await client.get(
        "/audit",
        params={"org": orgs.org_a, "action": "task.step.approve"},
        headers=orgs.admin_a.headers,
    )
    assert [row["actor"] for row in audit.json()["items"]] == [by]
    async with AsyncSession(db) as session:
        assert await verify(session) == []  # every chain intact


async def test_reject_halts_the_task(tasks: TaskApi, orgs: Orgs) -> None:
    made = await tasks.create(orgs.requester, orgs.org_a)
    await tasks.until(orgs.expert, made["id"], ticked)
    r = await tasks.decide(
        orgs.expert, made["id"], "read", "reject", {"feedback": "use September, not October"}
    )
    assert r.status_code == 200, r.text
    assert r.json()["decided"] is True and r.json()["verdict"] == "reject"
    task = await tasks.until(orgs.expert, made["id"], lambda t: t["phase"] == "Rejected")
    decision = task["status"]["steps"][0]["decision"]
    assert decision["verdict"] == "reject"
    assert decision["feedback"] == "use September, not October"
    assert task["status"].get("completedAt")
    late = await tasks.decide(orgs.expert2, made["id"], "write")
    assert late.status_code == 409 and late.json()["code"] == "run_state_conflict"
    assert late.json()["details"]["reason"] == "task_terminal"


async def test_an_expired_step_answers_410(tasks: TaskApi, orgs: Orgs) -> None:
    made = await tasks.create(
        orgs.requester,
        orgs.org_a,
        policy={
            "decisionDeadlineSeconds": 1,
            "escalation": {"maxEscalations": 0},
            "onExpiry": "End",
        },
    )
    await tasks.until(orgs.expert, made["id"], lambda t: t["phase"] == "Expired")
    for verdict, body in (("approve", {}), ("reject", {"feedback": "too late"})):
        r = await tasks.decide(orgs.expert, made["id"], "read", verdict, body)
        assert r.status_code == 410, r.text
        assert r.json()["code"] == "human_task_expired"


async def test_another_orgs_user_finds_nothing(
    tasks: TaskApi, orgs: Orgs, client: httpx.AsyncClient
) -> None:
    made = await tasks.create(orgs.requester, orgs.org_a)
    await tasks.until(orgs.expert, made["id"], ticked)
    for caller in (orgs.expert_b, orgs.admin_b):
        h = caller.headers
        calls = [
            client.get(f"/agentic/tasks/{made['id']}", headers=h),
            client.post(f"/agentic/tasks/{made['id']}/steps/read/approve", json={}, headers=h),
            client.post(
                f"/agentic/tasks/{made['id']}/steps/read/reject",
                json={"feedback": "no"},
                headers=h,
            ),
            client.get("/agentic/tasks", params={"org_id": orgs.org_a}, headers=h),
            client.post(
                "/agentic/tasks",
                json={**PLAN_BODY, "orgId": orgs.org_a},
                headers=h,
            ),
            # its own org's namespace with the other org's task name
            client.get(f"/agentic/tasks/{orgs.ns_b}/{made['name']}", headers=h),
        ]
        for call in calls:
            r = await call
            assert r.status_code == 404, r.text
            assert r.json()["code"] == "not_found"
        mine = await client.get("/agentic/tasks", headers=h)
        assert mine.status_code == 200 and mine.json()["total"] == 0
    task = await tasks.get(orgs.expert, made["id"])
    assert task.json()["status"]["steps"][0].get("decision") is None


PLAN_BODY: dict[str, Any] = {"agentRef": "shop", "description": "d", "steps": PLAN_STEPS}


CATALOG_READ = {"action": "getOrder", "params": {"id": 17}}
LOW = {
    "id": "look",
    "description": "Look up order 17",
    "tool": "shopify_query",
    "parameters": CATALOG_READ,
    "risk": "low",
}
MEDIUM = {**LOW, "id": "tag", "description": "Tag order 17", "risk": "medium"}
UNKNOWN = {**LOW, "id": "poke", "parameters": {"action": "pokeOrder"}}


async def opt_in(client: httpx.AsyncClient, org: str, admin: Any) -> None:
    r = await client.put(
        f"/orgs/{org}/policy", json={"autoApproveLow": True}, headers=admin.headers
    )
    assert r.status_code == 200, r.text


async def watch_caught_up(tasks: TaskApi, orgs: Orgs) -> None:
    """A barrier for "not auto-approved" checks: a task of org B (opted in) that asks for
    auto-approval, created after the tasks under test, was auto-approved, so the platform's
    watch had seen those before it (its events come in order) and queued or declined them."""
    marker = await tasks.create(
        orgs.expert_b, orgs.org_b, steps=[LOW], policy={"autoApprove": ["low"]}
    )
    await tasks.until(
        orgs.expert_b,
        marker["id"],
        lambda t: any(s.get("decision") for s in t["status"].get("steps", [])),
        within=60,
    )


async def settled(tasks: TaskApi, orgs: Orgs, task_id: str) -> dict[str, Any]:
    """The task once the operator ticked it and the platform's watch saw it (a barrier)."""
    await tasks.until(orgs.viewer, task_id, ticked, within=60)
    await watch_caught_up(tasks, orgs)
    task: dict[str, Any] = (await tasks.get(orgs.viewer, task_id)).json()
    return task


async def test_the_org_policy_is_set_by_policy_manage_only_and_audited(
    orgs: Orgs, client: httpx.AsyncClient
) -> None:
    path = f"/orgs/{orgs.org_a}/policy"
    r = await client.get(path, headers=orgs.viewer.headers)
    assert r.status_code == 200 and r.json()["autoApproveLow"] is False
    assert r.json()["requiredApprovals"] == {"low": 1, "medium": 1, "high": 1, "critical": 2}
    looser = {"autoApproveLow": True}
    for caller in (orgs.requester, orgs.expert, orgs.viewer):  # run.control is not enough
        r = await client.put(path, json=looser, headers=caller.headers)
        assert r.status_code == 403 and r.json()["code"] == "forbidden", r.text
    r = await client.put(path, json=looser, headers=orgs.admin_b.headers)  # another org's admin
    assert r.status_code == 404, r.text
    r = await client.put(path, json={"autoApproveLow": "yes please"}, headers=orgs.admin_a.headers)
    assert r.status_code == 422 and r.json()["code"] == "validation_failed"
    assert (await client.get(path, headers=orgs.viewer.headers)).json()["autoApproveLow"] is False
    policy = {"autoApproveLow": True, "requiredApprovals": {"high": 2}}
    r = await client.put(path, json=policy, headers=orgs.admin_a.headers)
    assert r.status_code == 200, r.text
    assert r.json()["requiredApprovals"]["high"] == 2
    audit = await client.get(
        "/audit",
        params={"org": orgs.org_a, "action": "org.policy.updated"},
        headers=orgs.admin_a.headers,
    )
    [row] = audit.json()["items"]
    assert row["actor"] == orgs.admin_a.username
    assert row["details"]["before"]["autoApproveLow"] is False
    assert row["details"]["after"]["autoApproveLow"] is True


async def test_the_org_quorum_binds_a_task_that_asks_for_less(
    tasks: TaskApi, orgs: Orgs, client: httpx.AsyncClient
) -> None:
    r = await client.put(
        f"/orgs/{orgs.org_a}/policy",
        json={"requiredApprovals": {"high": 2}},
        headers=orgs.admin_a.headers,
    )
    assert r.status_code == 200, r.text
    made = await tasks.create(
        orgs.requester,
        orgs.org_a,
        steps=[{**PLAN_STEPS[0], "id": "refund"}],
        policy={"requiredApprovals": {"high": 1}},
    )
    await tasks.until(orgs.expert, made["id"], ticked)
    first = await tasks.decide(orgs.expert, made["id"], "refund")
    assert first.status_code == 200, first.text
    assert first.json()["decided"] is False and first.json()["required_approvals"] == 2
    second = await tasks.decide(orgs.expert2, made["id"], "refund")
    assert second.status_code == 200 and second.json()["decided"] is True, second.text


async def test_auto_approval_needs_the_org_to_opt_in_and_a_catalog_read(
    tasks: TaskApi, orgs: Orgs, client: httpx.AsyncClient, cluster: Cluster
) -> None:
    await opt_in(client, orgs.org_b, orgs.admin_b)  # for the barrier's markers
    # the task asks, the org did not opt in: a human decides
    asked = await tasks.create(
        orgs.requester, orgs.org_a, steps=[LOW], policy={"autoApprove": ["low"]}
    )
    waiting = await settled(tasks, orgs, asked["id"])
    assert not waiting["status"]["steps"][0].get("decision"), waiting
    r = await client.put(
        f"/orgs/{orgs.org_a}/policy", json={"autoApproveLow": True}, headers=orgs.admin_a.headers
    )
    assert r.status_code == 200, r.text

    allowed = await tasks.create(
        orgs.requester,
        orgs.org_a,
        steps=[LOW, {**PLAN_STEPS[0], "id": "refund"}],
        policy={"autoApprove": ["low"]},
    )
    default = await tasks.create(orgs.requester, orgs.org_a, steps=[LOW])
    not_listed = await tasks.create(
        orgs.requester, orgs.org_a, steps=[MEDIUM], policy={"autoApprove": ["low"]}
    )
    unknown = await tasks.create(
        orgs.requester, orgs.org_a, steps=[UNKNOWN], policy={"autoApprove": ["low"]}
    )

    task = await tasks.until(
        orgs.viewer,
        allowed["id"],
        lambda t: any(s.get("decision") for s in t["status"].get("steps", [])),
    )
    decision = task["status"]["steps"][0]["decision"]
    assert (decision["verdict"], decision["by"]) == ("approve", "policy:auto-approve")
    assert decision["stepHash"] == allowed["step_hashes"]["look"]
    assert task["status"]["steps"][0]["approvals"] == [decision]
    assert all(not s.get("decision") for s in task["status"]["steps"][1:])  # high: a human
    audit = await client.get(
        "/audit",
        params={"org": orgs.org_a, "action": "task.step.auto_approve"},
        headers=orgs.admin_a.headers,
    )
    rows = audit.json()["items"]
    assert [(r["actor"], r["target"]) for r in rows] == [
        ("policy:auto-approve", f"agentictask:{allowed['id']}")
    ]
    assert rows[0]["details"]["step_id"] == "look" and rows[0]["details"]["risk"] == "low"
    assert rows[0]["details"]["org_policy"]["autoApproveLow"] is True

    # the task's default policy, a risk above low and an action outside the catalog wait
    for made in (default, not_listed, unknown):
        waiting = await settled(tasks, orgs, made["id"])
        assert not waiting["status"]["steps"][0].get("decision"), waiting
        assert waiting["phase"] == "PendingApproval"
    queue = await client.get("/human-tasks", headers=orgs.viewer.headers)
    assert {default["id"], not_listed["id"], unknown["id"]} <= {
        i["task_id"] for i in queue.json()["items"]
    }
    # an expert decides them as usual
    r = await tasks.decide(orgs.expert, default["id"], "look")
    assert r.status_code == 200, r.text
    assert r.json()["task"]["status"]["steps"][0]["decision"]["by"] == orgs.expert.username
