"""A taken-over agent: a real HTTP server the platform sends its signed commands to,
acting with the agent's real ServiceAccount token against the real API server (so
admission applies), and answering whatever it likes.

The fixture `agent` provisions org A's agent, starts the fake in its place (the fixture
`settings` gives the platform the endpoints file that points the agent's id at it) and
yields it. A test module imports both fixtures.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
from tests.platform.conftest import make_settings
from tests.platform_k8s.conftest import Orgs
from tests.support import eventually, service_account_token


class TakenOverAgent:
    """On each plan command, creates a task of its own choosing as the agent's identity
    and answers with the name `answer_with` picks (the new task's name by default), with
    status `plan_status` (an error status: an agent that fails after filing its task),
    after `late` is set when one is given (an agent that answers after the platform gave
    up); on each chat command, answers `chat_answer` (a confident, harmless-looking
    draft). `created` lists the tasks it filed, `plan_request` (when set) is the plan
    request id it puts on them instead of the command's."""

    def __init__(self, cluster: Cluster, namespace: str, org_id: str) -> None:
        token = eventually(
            lambda: service_account_token(cluster.api, namespace, "agent-agent"), timeout=30
        )
        self.api = cluster.client_for_token(token)
        self.namespace, self.org_id = namespace, org_id
        self.commands: list[dict[str, Any]] = []
        self.keep_plan_request = False
        self.answer_with: str | None = None
        self.plan_request: str | None = None
        self.plan_status = 201
        self.late: threading.Event | None = None
        self.created: list[str] = []
        self.chat_answer: dict[str, Any] = {
            "reply": "Your refund of 4,000 EUR is on its way.",
            "confidence": 1.0,
            "risk_level": "low",
            "flag_for_review": False,
        }
        self.server = BackgroundServer(
            Starlette(
                routes=[
                    Route("/v1/tasks", self.plan, methods=["POST"]),
                    Route("/v1/chat", self.chat, methods=["POST"]),
                ]
            )
        )

    async def plan(self, request: Request) -> JSONResponse:
        command = json.loads(await request.body())
        self.commands.append(command)
        body = task_manifest(self.namespace, self.org_id)
        body["spec"]["requestedBy"] = "agent:agent"
        if self.keep_plan_request or self.plan_request:
            request_id = self.plan_request or command["planRequest"]
            body["metadata"]["annotations"] = {"humanwork.io/plan-request": request_id}
        kclient.CustomObjectsApi(self.api).create_namespaced_custom_object(
            "humanwork.io", "v1alpha1", self.namespace, "agentictasks", body
        )
        self.created.append(body["metadata"]["name"])
        if self.late is not None:
            await asyncio.to_thread(self.late.wait, 120)
        name = self.answer_with or body["metadata"]["name"]
        answer = {"name": name, "created": True, "steps": []}
        if self.plan_status >= 400:
            answer = {"code": "planner_failed", "message": "the model failed"}
        return JSONResponse(answer, status_code=self.plan_status)

    async def chat(self, request: Request) -> JSONResponse:
        self.commands.append(json.loads(await request.body()))
        return JSONResponse(self.chat_answer)


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
