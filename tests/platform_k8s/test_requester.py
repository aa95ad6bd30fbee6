"""The requester of a planned task is the one the platform vouches for, whatever a
compromised agent answers (issue 12, item 3).

The agent here is a fake that has been taken over: a real HTTP server the platform sends
its signed plan command to, acting with the agent's real ServiceAccount token against the
real API server (so admission applies), and answering whatever it likes.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client as kclient
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from humanwork_dev.fakes.server import BackgroundServer
from platform_api.settings import Settings
from tests.agents import LLM_KEY, create_instance, wait_phase
from tests.conftest import Cluster
from tests.integration.test_tasks import task_manifest
from tests.platform.conftest import Api, make_settings
from tests.platform_k8s.conftest import Orgs
from tests.support import eventually, service_account_token


class TakenOverAgent:
    """Creates, on each plan command, a task of its own choosing as the agent's identity
    and answers with the name `answer` picks (the new task's name by default)."""

    def __init__(self, cluster: Cluster, namespace: str, org_id: str) -> None:
        token = eventually(
            lambda: service_account_token(cluster.api, namespace, "agent-agent"), timeout=30
        )
        self.api = cluster.client_for_token(token)
        self.namespace, self.org_id = namespace, org_id
        self.commands: list[dict[str, Any]] = []
        self.keep_plan_request = False
        self.answer_with: str | None = None
        self.server = BackgroundServer(
            Starlette(routes=[Route("/v1/tasks", self.plan, methods=["POST"])])
        )

    async def plan(self, request: Request) -> JSONResponse:
        command = json.loads(await request.body())
        self.commands.append(command)
        body = task_manifest(self.namespace, self.org_id)
        body["spec"]["requestedBy"] = "agent:agent"
        if self.keep_plan_request:
            body["metadata"]["annotations"] = {"humanwork.io/plan-request": command["planRequest"]}
        kclient.CustomObjectsApi(self.api).create_namespaced_custom_object(
            "humanwork.io", "v1alpha1", self.namespace, "agentictasks", body
        )
        name = self.answer_with or body["metadata"]["name"]
        return JSONResponse({"name": name, "created": True, "steps": []}, status_code=201)


@pytest.fixture
def settings(database_url: str, platform_kubeconfig: Path, endpoints_file: Path) -> Settings:
    return make_settings(
        database_url, kubeconfig=str(platform_kubeconfig), agent_endpoints_file=endpoints_file
    )


@pytest.fixture
def agent(cluster: Cluster, orgs: Orgs, endpoints_file: Path) -> Iterator[TakenOverAgent]:
    kclient.CoreV1Api(cluster.api).create_namespaced_secret(
        orgs.ns_a,
        kclient.V1Secret(
            metadata=kclient.V1ObjectMeta(name="llm"), string_data={"api-key": LLM_KEY}
        ),
    )
    create_instance(cluster, orgs.ns_a, orgs.org_a)
    wait_phase(cluster, orgs.ns_a, "Ready")
    fake = TakenOverAgent(cluster, orgs.ns_a, orgs.org_a)
    with fake.server:
        endpoints_file.write_text(json.dumps({f"{orgs.ns_a}/agent": fake.server.url}))
        yield fake
    fake.api.close()


async def ask(client: httpx.AsyncClient, orgs: Orgs, key: str | None = None) -> dict[str, Any]:
    headers = dict(orgs.requester.headers)
    if key:
        headers["Idempotency-Key"] = key
    r = await client.post(
        f"/orgs/{orgs.org_a}/agents/agent/tasks", json={"request": "anything"}, headers=headers
    )
    assert r.status_code == 201, r.text
    planned: dict[str, Any] = r.json()
    return planned


async def requested_by(client: httpx.AsyncClient, orgs: Orgs, task_id: str) -> str:
    r = await client.get(f"/agentic/tasks/{task_id}", headers=orgs.expert.headers)
    assert r.status_code == 200, r.text
    return str(r.json()["requested_by"])


async def bound(client: httpx.AsyncClient, api: Api, task_id: str) -> bool:
    root = await api.admin()
    r = await client.get(
        "/audit", params={"action": "task.plan_requested", "limit": 500}, headers=root.headers
    )
    assert r.status_code == 200, r.text
    found = [i for i in r.json()["items"] if i["target"] == f"task:{task_id}"]
    assert len(found) == 1
    return bool(found[0]["details"]["requesterBound"])


async def test_a_task_without_the_plan_requests_id_is_requested_by_the_agent(
    client: httpx.AsyncClient, orgs: Orgs, api: Api, agent: TakenOverAgent
) -> None:
    planned = await ask(client, orgs)
    assert agent.commands[-1]["planRequest"]  # the platform sent an id ...
    # ... which the agent left off: the platform vouches for nobody
    assert await requested_by(client, orgs, planned["id"]) == "agent:agent"
    assert not await bound(client, api, planned["id"])
    # and yet the person who asked cannot approve the plan they asked for
    url = f"/agentic/tasks/{planned['id']}/steps/read/approve"
    own = await client.post(url, json={}, headers=orgs.requester.headers)
    assert own.status_code == 403 and own.json()["code"] == "self_approval_forbidden"
    other = await client.post(url, json={}, headers=orgs.expert.headers)
    assert other.status_code == 200, other.text


async def test_an_agent_cannot_pin_a_request_on_a_task_made_for_another(
    client: httpx.AsyncClient, orgs: Orgs, api: Api, agent: TakenOverAgent
) -> None:
    agent.keep_plan_request = True
    first = await ask(client, orgs, key=f"k-{uuid.uuid4().hex[:6]}")
    assert await requested_by(client, orgs, first["id"]) == orgs.requester.username
    assert await bound(client, api, first["id"])

    # a second request (another id); the agent answers with an earlier task of its own,
    # made on its own: it stays the agent's
    agent.keep_plan_request = False
    loose = await ask(client, orgs)
    agent.keep_plan_request = True
    agent.answer_with = loose["id"].split("/")[1]
    again = await ask(client, orgs)
    assert again["id"] == loose["id"]
    assert await requested_by(client, orgs, loose["id"]) == "agent:agent"
    # and the first, bound task keeps its requester whatever the agent answers next
    agent.answer_with = first["id"].split("/")[1]
    await ask(client, orgs)
    assert await requested_by(client, orgs, first["id"]) == orgs.requester.username
