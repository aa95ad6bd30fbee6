"""The operator's side of AgenticTasks on the real control plane: deadlines, escalation,
expiry, derived phase and current step, the agent check, Events, and the removal of
archived finished tasks. Decisions are written as the platform API's ServiceAccount and
executions as the agent's (whose Role the operator made), each with server-side apply of
its own fields, as the three writers do."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client

from humanwork_core import taskflow
from humanwork_core.policy import STRICT
from humanwork_core.resources import AgenticTask, Verdict
from humanwork_dev.processes import PLATFORM_NS
from tests.conftest import Cluster
from tests.integration.conftest import TASK_TTL_SECONDS
from tests.support import eventually, service_account_token

GROUP, VERSION, TASKS = "humanwork.io", "v1alpha1", "agentictasks"


class Writer:
    """One of the three writers: its identity and its own fields of the task's status."""

    def __init__(self, cluster: Cluster, namespace: str, account: str, role: taskflow.Writer):
        self.api = client.CustomObjectsApi(
            cluster.client_for_token(service_account_token(cluster.api, namespace, account))
        )
        self.role = role
        self.manager = f"test-{role.value}"

    def apply(self, task: AgenticTask, status: Any) -> None:
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "AgenticTask",
            "metadata": {"name": task.metadata.name, "namespace": task.metadata.namespace},
            "status": taskflow.owned_status(status, self.role),
        }
        self.api.patch_namespaced_custom_object_status(
            GROUP,
            VERSION,
            task.metadata.namespace,
            TASKS,
            task.metadata.name,
            body,
            field_manager=self.manager,
            _content_type="application/apply-patch+yaml",
        )


def task_manifest(ns: str, org_id: str, agent: str = "agent", **policy: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "AgenticTask",
        "metadata": {"name": f"t-{uuid.uuid4().hex[:6]}", "namespace": ns},
        "spec": {
            "orgId": org_id,
            "agentRef": {"name": agent},
            "conversationId": str(uuid.uuid4()),
            "description": "Reconcile all Amazon orders for October and update Shopify",
            "requestedBy": "ops@example.com",
            "policy": policy,
            "steps": [
                {
                    "id": "read",
                    "description": "Fetch October orders",
                    "kind": "action",
                    "tool": "amazon_query",
                    "parameters": {"month": "2026-10"},
                    "risk": "low",
                },
                {
                    "id": "write",
                    "description": "Update inventory of 14 SKUs",
                    "kind": "action",
                    "tool": "shopify_query",
                    "parameters": {"skus": 14},
                    "risk": "high",
                },
            ],
        },
    }


def create_task(cluster: Cluster, body: dict[str, Any]) -> str:
    client.CustomObjectsApi(cluster.api).create_namespaced_custom_object(
        GROUP, VERSION, body["metadata"]["namespace"], TASKS, body
    )
    return str(body["metadata"]["name"])


def read_task(cluster: Cluster, ns: str, name: str) -> AgenticTask:
    raw = client.CustomObjectsApi(cluster.api).get_namespaced_custom_object(
        GROUP, VERSION, ns, TASKS, name
    )
    return AgenticTask.from_wire(raw)


def wait_task(
    cluster: Cluster, ns: str, name: str, check: Callable[[AgenticTask], bool], timeout: float = 20
) -> AgenticTask:
    def met() -> AgenticTask | None:
        task = read_task(cluster, ns, name)
        return task if check(task) else None

    result: AgenticTask = eventually(met, timeout=timeout)
    return result


def events_of(cluster: Cluster, ns: str, name: str) -> set[str]:
    listed = client.CoreV1Api(cluster.api).list_namespaced_event(
        ns, field_selector=f"involvedObject.kind=AgenticTask,involvedObject.name={name}"
    )
    return {e.reason for e in listed.items}


def now() -> datetime:
    return datetime.now(UTC)


def approve(platform: Writer, task: AgenticTask, step_id: str, verdict: Verdict) -> None:
    step = task.step(step_id)
    assert step is not None
    request = taskflow.DecisionRequest(
        verdict=verdict,
        by="expert@example.com",
        step_hash=taskflow.step_hash(step),
        idempotency_key=uuid.uuid4().hex,
        feedback="not now" if verdict is Verdict.REJECT else None,
    )
    platform.apply(task, taskflow.decide(task, step_id, request, now(), org=STRICT))


def execute(agent: Writer, cluster: Cluster, task: AgenticTask, step_id: str) -> None:
    agent.apply(task, taskflow.start_execution(task, step_id, now()))
    task = read_task(cluster, task.metadata.namespace or "", task.metadata.name)
    agent.apply(task, taskflow.finish_execution(task, step_id, now(), result={"ok": True}))


def test_a_task_is_driven_from_pending_to_completed(
    cluster: Cluster, ready_agent: tuple[str, str]
) -> None:
    ns, org_id = ready_agent
    name = create_task(cluster, task_manifest(ns, org_id))
    task = wait_task(cluster, ns, name, lambda t: t.current_status().phase is not None)
    status = task.current_status()
    assert (status.phase, status.current_step) == ("PendingApproval", "read")
    first = status.step("read")
    assert first.deadline is not None and status.next_deadline == first.deadline
    assert status.step("write").deadline is None  # only the decidable step has one
    assert status.highest_pending_risk is not None
    assert {c.type: c.status for c in status.conditions}["AgentAvailable"] == "True"

    platform = Writer(cluster, PLATFORM_NS, "humanwork-platform-api", taskflow.Writer.PLATFORM_API)
    agent = Writer(cluster, ns, "agent-agent", taskflow.Writer.AGENT)

    approve(platform, task, "read", Verdict.APPROVE)
    task = wait_task(
        cluster, ns, name, lambda t: t.current_status().step("read").state == "Approved"
    )
    assert task.current_status().phase == "InProgress"
    execute(agent, cluster, task, "read")
    task = wait_task(cluster, ns, name, lambda t: t.current_status().current_step == "write")
    assert task.current_status().step("write").deadline is not None

    approve(platform, task, "write", Verdict.APPROVE)
    task = wait_task(
        cluster, ns, name, lambda t: t.current_status().step("write").state == "Approved"
    )
    execute(agent, cluster, task, "write")
    done = wait_task(cluster, ns, name, lambda t: t.current_status().phase == "Completed")
    assert done.current_status().completed_at is not None
    assert done.current_status().next_deadline is None
    assert eventually(lambda: {"TaskInProgress", "TaskCompleted"} <= events_of(cluster, ns, name))


def test_a_rejection_halts_the_task(cluster: Cluster, ready_agent: tuple[str, str]) -> None:
    ns, org_id = ready_agent
    name = create_task(cluster, task_manifest(ns, org_id))
    task = wait_task(cluster, ns, name, lambda t: t.current_status().phase is not None)
    platform = Writer(cluster, PLATFORM_NS, "humanwork-platform-api", taskflow.Writer.PLATFORM_API)
    approve(platform, task, "read", Verdict.REJECT)
    halted = wait_task(cluster, ns, name, lambda t: t.current_status().phase == "Rejected")
    assert halted.current_status().step("write").deadline is None
    assert eventually(lambda: "TaskRejected" in events_of(cluster, ns, name))


def test_missed_deadlines_escalate_and_then_expire(
    cluster: Cluster, ready_agent: tuple[str, str]
) -> None:
    ns, org_id = ready_agent
    body = task_manifest(
        ns,
        org_id,
        decisionDeadlineSeconds=2,
        escalation={"intervalSeconds": 2, "maxEscalations": 1},
        onExpiry="End",
    )
    name = create_task(cluster, body)
    escalated = wait_task(
        cluster, ns, name, lambda t: t.current_status().step("read").escalations == 1, timeout=15
    )
    assert escalated.current_status().step("read").state == "Escalated"
    assert escalated.current_status().phase == "PendingApproval"  # still decidable
    expired = wait_task(
        cluster, ns, name, lambda t: t.current_status().phase == "Expired", timeout=15
    )
    assert expired.current_status().step("read").state == "Expired"
    assert eventually(lambda: {"Escalated", "TaskExpired"} <= events_of(cluster, ns, name))

    # an expired task can no longer be decided: the contract says human_task_expired
    platform = Writer(cluster, PLATFORM_NS, "humanwork-platform-api", taskflow.Writer.PLATFORM_API)
    with pytest.raises(taskflow.TaskFlowError) as refused:
        approve(platform, expired, "read", Verdict.APPROVE)
    assert refused.value.code in ("human_task_expired", "task_terminal")


def test_a_task_naming_no_agent_of_its_namespace_says_so(
    cluster: Cluster, ready_agent: tuple[str, str]
) -> None:
    ns, org_id = ready_agent
    name = create_task(cluster, task_manifest(ns, org_id, agent="ghost"))
    task = wait_task(cluster, ns, name, lambda t: bool(t.current_status().conditions))
    cond = {c.type: c for c in task.current_status().conditions}["AgentAvailable"]
    assert (cond.status, cond.reason) == ("False", "AgentNotFound")


def test_archived_finished_tasks_are_removed_after_their_ttl(
    cluster: Cluster, ready_agent: tuple[str, str]
) -> None:
    ns, org_id = ready_agent
    platform = Writer(cluster, PLATFORM_NS, "humanwork-platform-api", taskflow.Writer.PLATFORM_API)
    names = []
    for _ in range(2):
        name = create_task(cluster, task_manifest(ns, org_id))
        task = wait_task(cluster, ns, name, lambda t: t.current_status().phase is not None)
        approve(platform, task, "read", Verdict.REJECT)
        wait_task(cluster, ns, name, lambda t: t.current_status().phase == "Rejected")
        names.append(name)
    archived, kept = names
    objects = client.CustomObjectsApi(cluster.api)
    objects.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        ns,
        TASKS,
        archived,
        {"metadata": {"annotations": {"humanwork.io/archived": "2026-11-29T00:00:00Z"}}},
    )

    def gone() -> bool:
        try:
            objects.get_namespaced_custom_object(GROUP, VERSION, ns, TASKS, archived)
        except client.ApiException as exc:
            return exc.status == 404
        return False

    assert eventually(gone, timeout=TASK_TTL_SECONDS + 15)
    # a finished task the platform has not archived yet is kept, whatever its age
    assert read_task(cluster, ns, kept).current_status().phase == "Rejected"
