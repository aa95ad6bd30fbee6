"""Seed 000's contract where its clients hold it, on the real control plane and PostgreSQL:
a task is read and decided by its UUID (`metadata.uid`) within the caller's orgs only (a
UID of another org's task answers exactly what a random UUID answers), and the read model
gives each step its order and the seed's status beside the phase, at every stage of a
plan: pending, approved, executed, completed, rejected, failed, archived."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from kubernetes import client as kclient

from tests.browser.support import record_execution
from tests.conftest import Cluster
from tests.fixtures.stack import TASK_TTL_SECONDS
from tests.platform.conftest import Caller
from tests.platform_k8s.conftest import Orgs, TaskApi, ticked, until

ONE_STEP = [
    {"id": "only", "description": "Refund order 17", "tool": "shopify_refund", "risk": "high"}
]


def steps(task: dict[str, Any]) -> list[tuple[str, int, str]]:
    """(step id, order, seed status) of each step of the read model."""
    return [(s["step_id"], s["order"], s["status"]) for s in task["steps"]]


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


async def refusals(
    client: httpx.AsyncClient, caller: Caller, uid: str
) -> list[tuple[httpx.Response, httpx.Response]]:
    """Each UID route called by `caller` with `uid`, beside the same call with a random
    UUID: (for the UID, for the random one)."""
    pairs = []
    for target in (uid, str(uuid.uuid4())):
        h = caller.headers
        pairs.append(
            [
                await client.get(f"/agentic/tasks/{target}", headers=h),
                await client.post(
                    f"/agentic/tasks/{target}/steps/read/approve", json={}, headers=h
                ),
                await client.post(
                    f"/agentic/tasks/{target}/steps/read/reject",
                    json={"feedback": "no"},
                    headers=h,
                ),
            ]
        )
    return list(zip(pairs[0], pairs[1], strict=True))


async def test_a_task_is_read_by_its_uid_in_its_own_org_only(
    tasks: TaskApi, orgs: Orgs, client: httpx.AsyncClient
) -> None:
    made = await tasks.create(orgs.requester, orgs.org_a)
    by_name = await tasks.until(orgs.expert, made["id"], ticked)

    # positive control: org A's expert (and viewer) read it by its UID
    for caller in (orgs.expert, orgs.viewer):
        r = await tasks.get(caller, made["uid"])
        assert r.status_code == 200, r.text
        by_uid = r.json()
        assert (by_uid["id"], by_uid["uid"]) == (made["id"], made["uid"])
        for field in ("spec", "step_hashes", "steps", "seed_status", "org_id"):
            assert by_uid[field] == by_name[field], field

    # the attacker: org B's expert and admin hold org A's UID
    for caller in (orgs.expert_b, orgs.admin_b):
        for foreign, unknown in await refusals(client, caller, made["uid"]):
            assert foreign.status_code == 404, foreign.text
            assert foreign.json()["code"] == "not_found"
            # exactly what an unknown UUID answers: the route's existence is not measured
            assert (foreign.status_code, foreign.json()) == (unknown.status_code, unknown.json())
    # nothing was decided by the refused calls
    after = (await tasks.get(orgs.expert, made["id"])).json()
    assert after["status"]["steps"][0].get("decision") is None
    assert steps(after) == [("read", 1, "pending"), ("write", 2, "pending")]

    # a UID of no task in the caller's own org is the same 404; not a UUID is a 422
    r = await tasks.get(orgs.expert, str(uuid.uuid4()))
    assert r.status_code == 404 and r.json()["code"] == "not_found"
    r = await tasks.get(orgs.expert, "not-a-uuid")
    assert r.status_code == 422 and r.json()["code"] == "validation_failed"
    assert "task_uid" in r.text


async def test_a_step_is_decided_by_the_tasks_uid_only_in_its_org(
    tasks: TaskApi, orgs: Orgs, cluster: Cluster
) -> None:
    made = await tasks.create(orgs.requester, orgs.org_a)
    task = await tasks.until(orgs.expert, made["id"], ticked)
    for caller in (orgs.expert_b, orgs.admin_b):
        r = await tasks.decide(caller, made["uid"], "read")
        assert r.status_code == 404 and r.json()["code"] == "not_found", r.text
    untouched = (await tasks.get(orgs.expert, made["uid"])).json()
    assert untouched["status"]["steps"][0].get("decision") is None

    # the same rules as by name: the requester may not approve its own step
    r = await tasks.decide(orgs.requester, made["uid"], "read")
    assert r.status_code == 403 and r.json()["code"] == "self_approval_forbidden", r.text

    # positive control: org A's expert approves by UID, bound to the step it saw
    body = {"stepHash": task["step_hashes"]["read"], "feedback": "fine"}
    r = await tasks.decide(orgs.expert, made["uid"], "read", body=body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["decided"] is True and out["task"]["id"] == made["id"]
    assert out["task"]["status"]["steps"][0]["decision"]["by"] == orgs.expert.username
    assert out["task"]["steps"][0] == {
        "step_id": "read",
        "order": 1,
        "status": "approved",
        "state": "Approved",
        "expert_feedback": "fine",
    }
    # and a rejection by UID halts the next step
    record_execution(cluster, made["id"], "read", {"orders": 3})
    await tasks.until(orgs.expert, made["id"], lambda t: t["current_step"] == "write" and ticked(t))
    r = await tasks.decide(orgs.expert, made["uid"], "write", "reject", {"feedback": "no"})
    assert r.status_code == 200, r.text
    done = await tasks.until(orgs.expert, made["uid"], lambda t: t["phase"] == "Rejected")
    assert done["seed_status"] == "rejected"
    assert steps(done) == [("read", 1, "executed"), ("write", 2, "rejected")]


async def test_each_stage_of_a_plan_in_the_seeds_words(
    tasks: TaskApi, orgs: Orgs, client: httpx.AsyncClient, cluster: Cluster
) -> None:
    made = await tasks.create(orgs.requester, orgs.org_a)
    assert made["seed_status"] == "pending_approval"
    assert steps(made) == [("read", 1, "pending"), ("write", 2, "pending")]
    await tasks.until(orgs.expert, made["id"], ticked)

    r = await tasks.decide(orgs.expert, made["id"], "read")
    assert r.status_code == 200, r.text
    approved = await tasks.until(orgs.viewer, made["uid"], lambda t: t["phase"] == "InProgress")
    # approved, and no agent has started it
    assert approved["seed_status"] == "approved"
    assert steps(approved) == [("read", 1, "approved"), ("write", 2, "pending")]

    record_execution(cluster, made["id"], "read", {"orders": 3})
    executed = await tasks.until(
        orgs.viewer, made["uid"], lambda t: t["current_step"] == "write" and ticked(t)
    )
    assert (executed["phase"], executed["seed_status"]) == ("PendingApproval", "pending_approval")
    assert steps(executed) == [("read", 1, "executed"), ("write", 2, "pending")]
    assert [s["state"] for s in executed["steps"]] == ["Executed", "Pending"]

    # the write is critical: two distinct experts
    for expert in (orgs.expert, orgs.expert2):
        r = await tasks.decide(expert, made["id"], "write")
        assert r.status_code == 200, r.text
    record_execution(cluster, made["id"], "write", {"ok": 1})
    done = await tasks.until(orgs.viewer, made["uid"], lambda t: t["phase"] == "Completed")
    assert done["seed_status"] == "completed"
    assert steps(done) == [("read", 1, "executed"), ("write", 2, "executed")]

    failing = await tasks.create(orgs.requester, orgs.org_a)
    await tasks.until(orgs.expert, failing["id"], ticked)
    r = await tasks.decide(orgs.expert, failing["id"], "read")
    assert r.status_code == 200, r.text
    record_execution(cluster, failing["id"], "read", None, "Failed", "the shop answered 500")
    failed = await tasks.until(orgs.viewer, failing["uid"], lambda t: t["phase"] == "Failed")
    assert failed["seed_status"] == "failed"
    assert steps(failed) == [("read", 1, "failed"), ("write", 2, "pending")]

    # the list shows each task's seed status too
    listed = await client.get("/agentic/tasks", headers=orgs.viewer.headers)
    assert listed.status_code == 200, listed.text
    seen = {t["uid"]: t["seed_status"] for t in listed.json()["items"]}
    assert seen == {made["uid"]: "completed", failing["uid"]: "failed"}


async def test_an_archived_task_is_read_by_its_uid_in_its_own_org_only(
    tasks: TaskApi, orgs: Orgs, client: httpx.AsyncClient, cluster: Cluster
) -> None:
    made = await tasks.create(orgs.requester, orgs.org_a, steps=ONE_STEP)
    await tasks.until(orgs.expert, made["id"], ticked)
    r = await tasks.decide(orgs.expert, made["uid"], "only", "reject", {"feedback": "no"})
    assert r.status_code == 200, r.text

    async def gone() -> dict[str, Any] | None:
        return resource(cluster, made["id"])

    await until(gone, lambda found: found is None, within=TASK_TTL_SECONDS + 60)

    r = await tasks.get(orgs.viewer, made["uid"])
    assert r.status_code == 200, r.text
    task = r.json()
    assert task["archived"] is True and task["id"] == made["id"]
    assert task["seed_status"] == "rejected"
    assert task["steps"] == [
        {
            "step_id": "only",
            "order": 1,
            "status": "rejected",
            "state": "Rejected",
            "expert_feedback": "no",
        }
    ]
    for caller in (orgs.expert_b, orgs.admin_b):
        foreign = await tasks.get(caller, made["uid"])
        unknown = await tasks.get(caller, str(uuid.uuid4()))
        assert foreign.status_code == 404, foreign.text
        assert (foreign.status_code, foreign.json()) == (unknown.status_code, unknown.json())
