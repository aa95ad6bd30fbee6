"""The agent runtime on the real control plane, run as a process with exactly what its pod
spec gives it (humanwork_dev.runagent), talking to a stand-in platform (a local HTTP
server that checks the agent's signatures and token and answers read-only tool calls
from the fakes' seeded merchant).

- The seed's example, sent as a signed command, becomes an AgenticTask in the org's
  namespace with a low-risk read step and a high-risk write step, created by the agent's
  own ServiceAccount, and `task.plan_ready` reaches the platform signed with the
  instance's secret; unsigned commands are refused.
- With planning lookups on, the write step carries the exact correction of the seeded
  discrepancy, worked out through read-only calls to the platform's tool proxy.
- The agent's Kubernetes identity (its projected token, used by agent_image.kube) may
  create, list and watch its tasks and write step executions, and nothing else: not a
  decision, not an execution before an approval, not a task in another namespace.
- The process environment holds no database URL and no third-party credential.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client

from agent_image.kube import KubeClient, KubeForbidden, KubeInvalid
from agent_image.settings import AgentSettings
from humanwork_core import signing, taskflow
from humanwork_core.resources import (
    AgenticTask,
    AgenticTaskStatus,
    Execution,
    ExecutionState,
    StepStatus,
    Verdict,
)
from humanwork_dev.fakes import catalog
from humanwork_dev.processes import PLATFORM_NS, AgentProcess
from tests.agents import agent_token
from tests.conftest import Cluster
from tests.integration.test_tasks import Writer, approve
from tests.support import eventually
from tests.unit.test_agent_events import Receiver
from tests.unit.test_agent_planner import SEED_EXAMPLE, catalog_tool_result

GROUP, VERSION, TASKS = "humanwork.io", "v1alpha1", "agentictasks"
FORBIDDEN = ("DATABASE", "POSTGRES", "REDIS", "SHOPIFY", "AMAZON", "KUBECONFIG", "MYSQL")


@dataclass
class Running:
    namespace: str
    org_id: str
    process: AgentProcess
    platform: Receiver
    secret: str

    async def command(self, path: str, body: dict[str, Any]) -> httpx.Response:
        raw = json.dumps(body).encode()
        headers = {
            "Content-Type": "application/json",
            signing.SIGNATURE_HEADER: signing.sign(self.secret, raw, datetime.now(UTC)),
        }
        async with httpx.AsyncClient(timeout=30) as http:
            return await http.post(f"{self.process.url}{path}", content=raw, headers=headers)

    def env(self) -> dict[str, str]:
        """The process's real environment, as the kernel holds it."""
        raw = Path(f"/proc/{self.process.pid}/environ").read_bytes().decode()
        return dict(item.split("=", 1) for item in raw.split("\0") if "=" in item)


@pytest.fixture
def platform() -> Iterator[Receiver]:
    """The stand-in platform: events and read-only tool calls over the seeded merchant."""
    stand_in = Receiver()
    stand_in.tool_handler = catalog_tool_result
    stand_in.server.start()
    yield stand_in
    stand_in.server.stop()


def callback_secret(cluster: Cluster, ns: str) -> str:
    secret = client.CoreV1Api(cluster.api).read_namespaced_secret("agent-agent-callback", ns)
    data: Any = secret.data
    return base64.b64decode(data["secret"]).decode().strip()


@pytest.fixture
def agent(
    cluster: Cluster, ready_agent: tuple[str, str], platform: Receiver, tmp_path: Path
) -> Iterator[Running]:
    ns, org_id = ready_agent
    process = AgentProcess(cluster.kubeconfig, ns, "agent", tmp_path / "agent", platform.url)
    process.start()
    try:
        yield Running(ns, org_id, process, platform, callback_secret(cluster, ns))
    finally:
        process.stop()
        print(process.tail(40))


def read_task(cluster: Cluster, ns: str, name: str) -> dict[str, Any]:
    found: Any = client.CustomObjectsApi(cluster.api).get_namespaced_custom_object(
        GROUP, VERSION, ns, TASKS, name
    )
    return dict(found)


def wait_event(platform: Receiver, event_type: str, timeout: float = 15) -> dict[str, Any]:
    def arrived() -> dict[str, Any] | None:
        found = platform.of_type(event_type)
        return found[-1] if found else None

    event: dict[str, Any] = eventually(arrived, timeout=timeout)
    return event


async def test_the_seed_example_becomes_an_agentic_task_of_the_agent_itself(
    cluster: Cluster, agent: Running
) -> None:
    answer = await agent.command(
        "/v1/tasks", {"request": SEED_EXAMPLE, "requester": "client@example.com"}
    )
    assert answer.status_code == 201, answer.text
    name = answer.json()["name"]

    task = read_task(cluster, agent.namespace, name)
    spec = task["spec"]
    assert spec["orgId"] == agent.org_id
    assert spec["agentRef"] == {"name": "agent"}
    assert spec["description"] == SEED_EXAMPLE and spec["requestedBy"] == "agent:agent"
    read, write = spec["steps"]
    year = datetime.now(UTC).year
    assert (read["id"], read["kind"], read["tool"], read["risk"]) == (
        "step-1",
        "action",
        "amazon",
        "low",
    )
    assert read["parameters"] == {
        "action": "listOrders",
        "params": {
            "CreatedAfter": f"{year}-10-01T00:00:00Z",
            "CreatedBefore": f"{year}-11-01T00:00:00Z",
        },
    }
    assert (write["id"], write["tool"], write["risk"]) == ("step-2", "shopify", "high")
    assert write["parameters"] == {"action": "adjustInventoryLevel", "params": {}}
    # the typed model reads it back: the plan is a valid AgenticTask
    assert AgenticTask.from_wire(task).spec.steps[1].risk.value == "high"

    # created by the agent itself: its field manager, under its ServiceAccount's token
    assert {m["manager"] for m in task["metadata"]["managedFields"]} >= {"humanwork-agent"}
    token = (Path(agent.env()["HUMANWORK_KUBE_API_DIR"]) / "token").read_text()
    review = client.AuthenticationV1Api(cluster.client_for_token(token)).create_self_subject_review(
        client.V1SelfSubjectReview()
    )
    review_status: Any = review.status
    assert review_status.user_info.username == (
        f"system:serviceaccount:{agent.namespace}:agent-agent"
    )

    # the platform heard of the plan, signed with the instance's secret, with the agent token
    ready = wait_event(agent.platform, "task.plan_ready")
    received = next(
        r for r in agent.platform.events() if r.json["idempotency_key"] == ready["idempotency_key"]
    )
    signing.verify(
        agent.secret, received.headers["x-humanwork-signature"], received.body, datetime.now(UTC)
    )
    assert received.headers["authorization"] == f"Bearer {agent_token(cluster, agent.namespace)}"
    assert ready["task_id"] == name and ready["org_id"] == agent.org_id
    assert ready["agent_id"] == f"{agent.namespace}/agent"
    assert ready["payload"]["steps"] == spec["steps"]

    # nothing touched a store while planning; an unsigned command is refused
    assert agent.platform.tool_calls == []
    async with httpx.AsyncClient() as http:
        unsigned = await http.post(
            f"{agent.process.url}/v1/tasks",
            json={"request": SEED_EXAMPLE, "requester": "mallory"},
        )
    assert unsigned.status_code == 401 and unsigned.json()["code"] == "signature_missing"

    # cancelling is the agent's own record: it writes nothing the operator owns
    cancelled = await agent.command(f"/v1/tasks/{name}/cancel", {"reason": "changed mind"})
    assert cancelled.status_code == 202, cancelled.text
    event = wait_event(agent.platform, "error")
    assert event["payload"]["code"] == "task_cancelled" and event["task_id"] == name
    after = read_task(cluster, agent.namespace, name)
    assert (after.get("status") or {}).get("phase") != "Cancelled"
    assert not any(
        m["manager"] == "humanwork-agent" and m.get("subresource") == "status"
        for m in after["metadata"]["managedFields"]
    )
    async with httpx.AsyncClient() as http:
        status = (await http.get(f"{agent.process.url}/v1/status", timeout=5)).json()
    assert status["tasks"]["cancelled"] == [name]
    assert status["llm"]["mode"] == "offline" and status["model"] == "openai/gpt-4o"


async def test_with_planning_lookups_the_write_carries_the_exact_correction(
    cluster: Cluster, agent: Running
) -> None:
    configured = await agent.command("/v1/configure", {"planningLookups": True})
    assert configured.status_code == 200, configured.text
    answer = await agent.command(
        "/v1/tasks",
        {
            "request": SEED_EXAMPLE.replace("October", "October 2026"),
            "requester": "client@example.com",
        },
    )
    assert answer.status_code == 201, answer.text
    spec = read_task(cluster, agent.namespace, answer.json()["name"])["spec"]
    read, write = spec["steps"]
    assert read["risk"] == "low" and write["risk"] == "high"
    assert write["parameters"] == {
        "action": "adjustInventoryLevel",
        "params": {
            "location_id": catalog.WAREHOUSE_LOCATION_ID,
            "inventory_item_id": catalog.BY_SKU[catalog.DISCREPANT_SKU].inventory_item_id,
            "available_adjustment": -catalog.DISCREPANCY,
        },
    }
    # only reads, through the proxy, as the agent, with no task or step
    token = agent_token(cluster, agent.namespace)
    calls = agent.platform.tool_calls
    assert calls and all(c["authorization"] == f"Bearer {token}" for c in calls)
    assert all(c["task"] is None and c["step"] is None for c in calls)
    assert {c["action"] for c in calls} <= {
        "listOrders",
        "getOrderItems",
        "listProducts",
        "getInventoryLevels",
    }
    assert wait_event(agent.platform, "config.applied")["payload"]["source"] == "configure"
    assert len(agent.platform.of_type("tool.called")) >= len(calls) - 1


async def test_chat_uses_an_expert_correction(agent: Running) -> None:
    stored = await agent.command(
        "/v1/corrections",
        {
            "corrections": [
                {
                    "message": "Has my mug order shipped yet?",
                    "corrected": "Yes: it left our warehouse on Monday, tracking 1Z999.",
                }
            ]
        },
    )
    assert stored.status_code == 202, stored.text
    reply = (await agent.command("/v1/chat", {"message": "has my mug order shipped?"})).json()
    assert reply["reply"] == "Yes: it left our warehouse on Monday, tracking 1Z999."
    assert reply["flag_for_review"] is False and reply["model"] == "offline"


def test_the_agent_process_holds_no_database_url_or_third_party_credential(
    agent: Running,
) -> None:
    environ = agent.env()
    for name, value in environ.items():
        for word in FORBIDDEN:
            assert word not in name.upper() and word not in value.upper(), name
    assert not any(v.startswith(("postgres", "mysql", "redis", "sqlite")) for v in environ.values())
    # the pod's own settings, and files for the secrets
    assert environ["HUMANWORK_ORG_ID"] == agent.org_id
    assert Path(environ["HUMANWORK_TOKEN_FILE"]).is_file()
    assert Path(environ["HUMANWORK_CALLBACK_SECRET_FILE"]).is_file()


async def test_the_agents_identity_writes_executions_and_nothing_else(
    cluster: Cluster,
    ready_agent: tuple[str, str],
    tmp_path: Path,
    make_namespace: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """agent_image.kube with the agent's own in-cluster configuration (materialised, not
    run, so that nothing else acts on the task meanwhile)."""
    ns, org_id = ready_agent
    process = AgentProcess(cluster.kubeconfig, ns, "agent", tmp_path / "agent", "http://x.invalid")
    for key, value in process.spec.env.items():
        monkeypatch.setenv(key, value)
    settings = AgentSettings()  # type: ignore[call-arg]  # from the pod's environment
    kube = KubeClient.from_settings(settings)
    assert kube.base_url.startswith("https://") and kube.namespace == ns

    name = f"agent-{int(time.time() * 1000) % 10**8}"
    steps = [
        {
            "id": "step-1",
            "description": "Fetch the October orders",
            "tool": "amazon",
            "parameters": {
                "action": "listOrders",
                "params": {"CreatedAfter": "2026-10-01T00:00:00Z"},
            },
            "risk": "low",
        }
    ]
    body = {
        "metadata": {"name": name},
        "spec": {
            "orgId": org_id,
            "agentRef": {"name": "agent"},
            "description": "Fetch the October orders",
            "requestedBy": "agent:agent",
            "steps": steps,
        },
    }
    created = await kube.create_task(body)
    assert created["metadata"]["namespace"] == ns
    items, version = await kube.list_tasks()
    assert name in {i["metadata"]["name"] for i in items} and version
    assert (await kube.get_task(name)) is not None and (await kube.get_task("nope")) is None

    task = AgenticTask.from_wire(created)
    # no execution before an approving decision (the integrity policy)
    running = Execution(state=ExecutionState.RUNNING, started_at=datetime.now(UTC))
    early = taskflow.owned_status(
        AgenticTaskStatus().with_step(StepStatus(id="step-1", execution=running)),
        taskflow.Writer.AGENT,
    )
    with pytest.raises((KubeForbidden, KubeInvalid)) as refused:
        await kube.apply_task_status(name, {"status": early}, "humanwork-agent")
    assert "approving decision" in str(refused.value)

    # the platform API approves (its own identity), the watch sees it
    platform = Writer(cluster, PLATFORM_NS, "humanwork-platform-api", taskflow.Writer.PLATFORM_API)
    approve(platform, task, "step-1", Verdict.APPROVE)

    async def modified() -> dict[str, Any]:
        async for kind, obj in kube.watch_tasks(version, timeout_seconds=20):
            if kind == "MODIFIED" and obj["metadata"]["name"] == name:
                entry = obj.get("status", {}).get("steps", [{}])[0]
                if entry.get("decision"):
                    return obj
        raise AssertionError("no MODIFIED event with the decision")

    approved = AgenticTask.from_wire(await modified())
    # the agent may write the step's execution (server-side apply, its own field manager)
    started = taskflow.start_execution(approved, "step-1", datetime.now(UTC))
    applied = await kube.apply_task_status(
        name, {"status": taskflow.owned_status(started, taskflow.Writer.AGENT)}, "humanwork-agent"
    )
    assert applied["status"]["steps"][0]["execution"]["state"] == "Running"
    assert applied["status"]["steps"][0]["decision"]["verdict"] == "approve"

    # a result with a character outside the Basic Multilingual Plane (an upstream's product
    # title with an emoji) is written as it is: the apply body travels as UTF-8, not as the
    # surrogate escapes the API server's YAML reader refuses
    running_task = AgenticTask.from_wire(applied)
    title = "Gift box \U0001f381"
    finished = taskflow.finish_execution(
        running_task, "step-1", datetime.now(UTC), result={"title": title}
    )
    done = await kube.apply_task_status(
        name, {"status": taskflow.owned_status(finished, taskflow.Writer.AGENT)}, "humanwork-agent"
    )
    assert done["status"]["steps"][0]["execution"]["result"] == {"title": title}

    # but not a decision: only the platform API writes those
    forged = {
        "steps": [
            {
                "id": "step-1",
                "approvals": [{**applied["status"]["steps"][0]["decision"], "by": "mallory"}],
            }
        ]
    }
    with pytest.raises((KubeForbidden, KubeInvalid)) as refused:
        await kube.apply_task_status(name, {"status": forged}, "humanwork-agent")
    assert "platform API" in str(refused.value)

    # and nothing outside its own namespace
    other = make_namespace("org", labels={"humanwork.io/org-id": org_id})
    elsewhere = KubeClient(kube.base_url, other, kube.token_file, kube.ca_file)
    with pytest.raises(KubeForbidden):
        await elsewhere.create_task(body)
    with pytest.raises(KubeForbidden):
        await elsewhere.list_tasks()
    await elsewhere.aclose()
    await kube.aclose()
