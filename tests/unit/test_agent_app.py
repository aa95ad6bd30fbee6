"""The agent's HTTP API without a cluster: every command is refused without a valid HMAC
signature (missing, tampered, stale, replayed, wrong secret); chat offline and with a
model (a real local fake OpenAI server), streaming; expert corrections used by later
replies; the configuration overlay; tasks planned into AgenticTasks (against a scripted
API server) with `task.plan_ready`; cancellation; background jobs given the runtime."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from agent_image.app import Runtime, build_runtime, create_app
from agent_image.kube import KubeClient
from agent_image.settings import AgentSettings
from humanwork_core import signing
from humanwork_dev.fakes.openai_server import FakeOpenAI
from tests.unit.test_agent_events import ORG, SECRET, Receiver, agent_settings
from tests.unit.test_agent_planner import SEED_EXAMPLE

COMMANDS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("/v1/chat", {"message": "Where is my order?"}),
    ("/v1/chat/stream", {"message": "Where is my order?"}),
    ("/v1/tasks", {"request": SEED_EXAMPLE, "requester": "client@example.com"}),
    ("/v1/tasks/acme-1/cancel", {}),
    ("/v1/configure", {"model": "x"}),
    ("/v1/corrections", {"corrections": [{"message": "a", "corrected": "b"}]}),
)


def sign(
    body: Any, *, secret: str = SECRET, at: datetime | None = None
) -> tuple[bytes, dict[str, str]]:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    header = signing.sign(secret, raw, at or datetime.now(UTC))
    return raw, {signing.SIGNATURE_HEADER: header, "Content-Type": "application/json"}


class FakeKube:
    """AgenticTasks of one namespace in memory, behind httpx.MockTransport."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.requests: list[httpx.Request] = []
        self.refuse: tuple[int, str] | None = None
        self.version = 100

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.refuse is not None:
            code, message = self.refuse
            return httpx.Response(
                code,
                json={"kind": "Status", "code": code, "reason": "Forbidden", "message": message},
            )
        name = request.url.path.rsplit("/", 1)[-1]
        if request.method == "POST":
            body = json.loads(request.content)
            name = body["metadata"]["name"]
            if name in self.objects:
                return httpx.Response(
                    409,
                    json={
                        "kind": "Status",
                        "code": 409,
                        "reason": "AlreadyExists",
                        "message": "exists",
                    },
                )
            self.version += 1
            body["metadata"] |= {"uid": f"uid-{name}", "resourceVersion": str(self.version)}
            self.objects[name] = body
            return httpx.Response(201, json=body)
        if request.method == "GET" and name in self.objects:
            return httpx.Response(200, json=self.objects[name])
        return httpx.Response(
            404, json={"kind": "Status", "code": 404, "reason": "NotFound", "message": "not found"}
        )

    def client(self, settings: AgentSettings) -> KubeClient:
        return KubeClient(
            "https://kube.test",
            settings.namespace,
            settings.token_file,
            None,
            transport=httpx.MockTransport(self.handler),
        )


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    rec = Receiver()
    rec.server.start()
    yield rec
    rec.server.stop()


class Agent:
    def __init__(
        self, settings: AgentSettings, runtime: Runtime, app: FastAPI, kube: FakeKube
    ) -> None:
        self.settings = settings
        self.runtime = runtime
        self.app = app
        self.kube = kube
        self.http = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://agent"
        )

    async def post(self, path: str, body: Any, **headers: str) -> httpx.Response:
        raw, signed = sign(body)
        return await self.http.post(path, content=raw, headers={**signed, **headers})


async def make_agent(tmp_path: Path, receiver: Receiver, **settings: Any) -> Agent:
    config = agent_settings(tmp_path, receiver.url, **settings)
    kube = FakeKube()
    runtime = build_runtime(config, kube=kube.client(config))
    runtime.events.backoff = 0.01
    app = create_app(config, runtime=runtime, background=())
    return Agent(config, runtime, app, kube)


@pytest.fixture
async def agent(tmp_path: Path, receiver: Receiver) -> AsyncIterator[Agent]:
    made = await make_agent(tmp_path, receiver)
    yield made
    await made.http.aclose()


# --- signatures ------------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "body"), COMMANDS)
async def test_every_command_needs_a_signature(agent: Agent, path: str, body: Any) -> None:
    answer = await agent.http.post(path, json=body)
    assert answer.status_code == 401
    assert answer.json() == {
        "code": "signature_missing",
        "message": "the request carries no signature",
        "details": {},
    }


async def test_tampered_stale_replayed_and_foreign_signatures_are_refused(agent: Agent) -> None:
    body = {"message": "Where is my order?"}
    raw, headers = sign(body)
    tampered = raw.replace(b"order", b"refund")
    answer = await agent.http.post("/v1/chat", content=tampered, headers=headers)
    assert (answer.status_code, answer.json()["code"]) == (401, "signature_mismatch")

    raw, headers = sign(body, at=datetime.now(UTC) - timedelta(minutes=6))
    answer = await agent.http.post("/v1/chat", content=raw, headers=headers)
    assert (answer.status_code, answer.json()["code"]) == (401, "signature_expired")

    raw, headers = sign(body, secret="not-the-instance-secret")
    answer = await agent.http.post("/v1/chat", content=raw, headers=headers)
    assert answer.json()["code"] == "signature_mismatch"

    answer = await agent.http.post(
        "/v1/chat", content=raw, headers={signing.SIGNATURE_HEADER: "t=1,v2=abc"}
    )
    assert answer.json()["code"] == "signature_malformed"

    # a replayed task request (inside the window) is the same request: the same task
    task = {"request": SEED_EXAMPLE, "requester": "client@example.com"}
    raw, headers = sign(task)
    first = await agent.http.post("/v1/tasks", content=raw, headers=headers)
    again = await agent.http.post("/v1/tasks", content=raw, headers=headers)
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["name"] == again.json()["name"] and len(agent.kube.objects) == 1

    # a signature within the window but a minute old is fine
    raw, headers = sign({"message": "hello"}, at=datetime.now(UTC) - timedelta(minutes=1))
    assert (await agent.http.post("/v1/chat", content=raw, headers=headers)).status_code == 200


async def test_the_secret_is_read_from_its_file_each_time(agent: Agent) -> None:
    agent.settings.callback_secret_file.write_text("rotated")
    raw, headers = sign({"message": "hi"})
    assert (await agent.http.post("/v1/chat", content=raw, headers=headers)).status_code == 401
    raw, headers = sign({"message": "hi"}, secret="rotated")
    assert (await agent.http.post("/v1/chat", content=raw, headers=headers)).status_code == 200
    agent.settings.callback_secret_file.unlink()
    answer = await agent.post("/v1/chat", {"message": "hi"})
    assert (answer.status_code, answer.json()["code"]) == (503, "secret_unavailable")


async def test_health_and_status_are_open_and_errors_have_one_shape(agent: Agent) -> None:
    health = (await agent.http.get("/v1/health")).json()
    assert health == {"status": "ok", "configHash": agent.runtime.holder.current.config_hash}
    status = (await agent.http.get("/v1/status")).json()
    assert status["agentId"] == "org-acme/acme" and status["orgId"] == ORG
    assert status["model"] == "openai/gpt-4o" and status["llm"]["mode"] == "offline"
    assert status["tasks"] == {"running": {}, "cancelled": []}
    agent.runtime.track_task("acme-1", step="step-1", state="Executing")
    status = (await agent.http.get("/v1/status")).json()
    assert status["tasks"]["running"]["acme-1"]["step"] == "step-1"
    missing = await agent.http.get("/v1/nothing")
    assert missing.status_code == 404 and missing.json()["code"] == "not_found"
    invalid = await agent.post("/v1/chat", {"message": ""})
    assert invalid.status_code == 422 and invalid.json()["code"] == "validation_failed"
    assert invalid.json()["details"]["errors"][0]["loc"] == ["message"]
    broken = await agent.post("/v1/chat", b"{not json")
    assert broken.status_code == 422 and broken.json()["code"] == "validation_failed"


# --- chat ------------------------------------------------------------------------------------


async def test_an_offline_reply_goes_to_the_expert(agent: Agent) -> None:
    answer = await agent.post("/v1/chat", {"message": "Where is my order?"})
    body = answer.json()
    assert answer.status_code == 200
    assert body["reply"].startswith("Hi, this is Bob.")
    assert body["confidence"] == 0.3 and body["flag_for_review"] is True
    assert body["risk_level"] == "low" and body["model"] == "offline"
    assert body["mode"] == "domain" and body["usage"] == {}
    refund = (await agent.post("/v1/chat", {"message": "Please refund my payment"})).json()
    assert refund["risk_level"] == "critical" and refund["flag_for_review"] is True
    build = (await agent.post("/v1/chat", {"message": "Build me a website"})).json()
    assert build["mode"] == "agentic" and "plan" in build["reply"]


async def test_corrections_are_stored_and_used_by_later_replies(
    tmp_path: Path, agent: Agent
) -> None:
    corrected = "Hi Sam, your order left our warehouse today; tracking: 1Z999."
    answer = await agent.post(
        "/v1/corrections",
        {
            "corrections": [
                {
                    "id": "c-1",
                    "message": "Where is my order 1001? It has not arrived.",
                    "draft": "I do not know.",
                    "corrected": corrected,
                    "note": "always give the tracking number",
                    "by": "expert@example.com",
                }
            ]
        },
    )
    assert answer.status_code == 202 and answer.json() == {"stored": 1, "total": 1, "ids": ["c-1"]}
    reply = (await agent.post("/v1/chat", {"message": "where is my order 1001?"})).json()
    assert reply["reply"] == corrected
    assert reply["corrections_used"] == ["c-1"]
    assert reply["confidence"] > 0.7 and reply["flag_for_review"] is False
    other = (await agent.post("/v1/chat", {"message": "Do you sell gift cards?"})).json()
    assert other["reply"] != corrected and other["corrections_used"] == []
    # they live in the state folder: a restarted agent still has them
    again = build_runtime(agent.settings, kube=agent.kube.client(agent.settings))
    assert [c.id for c in again.corrections.all()] == ["c-1"]
    assert (tmp_path / "state" / "corrections.jsonl").exists()


async def test_corrections_sent_with_a_chat_command_are_kept_once_and_only_replies_reused(
    tmp_path: Path, agent: Agent
) -> None:
    # issue 14: the platform sends the org's corrections with each chat command
    corrected = "Order 1001 left today; tracking 1Z999."
    carried = [
        {
            "id": "r-1",
            "kind": "reply_edit",
            "message": "Where is my order 1001?",
            "corrected": corrected,
            "at": "2026-01-01T00:00:00+00:00",
        },
        {
            "id": "s-1",
            "kind": "step_rejected",
            "message": "Where is my refund 1001?",
            "corrected": "September only",
            "at": "2026-01-01T00:00:00+00:00",
        },
    ]
    for _ in range(3):
        reply = (
            await agent.post(
                "/v1/chat", {"message": "Where is my order 1001?", "corrections": carried}
            )
        ).json()
        assert reply["reply"] == corrected and reply["corrections_used"] == ["r-1"]
    lines = (tmp_path / "state" / "corrections.jsonl").read_text().splitlines()
    assert len(lines) == 2  # stored once, not with every command
    # a step's feedback is kept but never sent to a client as a reply
    refund = (await agent.post("/v1/chat", {"message": "Where is my refund 1001?"})).json()
    assert refund["reply"] != "September only" and refund["corrections_used"] == []
    bad = await agent.post(
        "/v1/chat", {"message": "hi", "corrections": [{**carried[0], "kind": "other"}]}
    )
    assert bad.status_code == 422 and bad.json()["code"] == "validation_failed"


async def test_the_offline_reply_streams_as_server_sent_events(agent: Agent) -> None:
    raw, headers = sign({"message": "Where is my order?"})
    answer = await agent.http.post("/v1/chat/stream", content=raw, headers=headers)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/event-stream")
    events = parse_sse(answer.text)
    tokens = [data["text"] for kind, data in events if kind == "token"]
    kind, done = events[-1]
    assert kind == "done" and len(tokens) > 5
    assert "".join(tokens) == done["reply"] and done["flag_for_review"] is True


def parse_sse(text: str) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        events.append((lines["event"], json.loads(lines["data"])))
    return events


@pytest.fixture
def llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


async def test_a_model_reply_with_a_read_only_tool_call_and_a_confidence_score(
    tmp_path: Path, receiver: Receiver, llm: FakeOpenAI
) -> None:
    made = await make_agent(tmp_path, receiver, llm_base_url=llm.url, llm_api_key="sk-agent")
    receiver.tool_answers[("shopify", "getOrder")] = {
        "order": {"id": 5600000000101, "name": "#1001"}
    }
    await made.post(
        "/v1/corrections",
        {"corrections": [{"message": "Where is order 1001?", "corrected": "It shipped."}]},
    )
    llm.tool_call("shopify__getOrder", {"id": "5600000000101"})
    llm.reply("Your order #1001 shipped yesterday.")
    llm.reply("8")
    answer = await made.post(
        "/v1/chat",
        {
            "message": "Where is order 1001?",
            "history": [
                {"role": "user", "content": "Hello"},
                {"role": "assistant", "content": "Hi!"},
            ],
            "context": ["Orders ship from the main warehouse."],
        },
    )
    body = answer.json()
    assert body["reply"] == "Your order #1001 shipped yesterday."
    assert body["confidence"] == 0.8 and body["flag_for_review"] is False
    assert body["model"] == "openai/gpt-4o" and body["responder"] == "llm"
    assert body["tool_calls"] == [{"tool": "shopify", "action": "getOrder"}]
    assert body["usage"]["totalTokens"] > 0
    first, second, rating = llm.requests
    assert first.authorization == "Bearer sk-agent"
    assert first.body["model"] == "openai/gpt-4o"
    system = first.messages[0]
    assert system["role"] == "system" and system["content"].startswith("You are Bob.")
    assert "Orders ship from the main warehouse." in system["content"]
    # the correction as a few-shot example, then the history, then the message
    assert [m["content"] for m in first.messages[1:]] == [
        "Where is order 1001?",
        "It shipped.",
        "Hello",
        "Hi!",
        "Where is order 1001?",
    ]
    names = {t["function"]["name"] for t in first.body["tools"]}
    assert "shopify__getOrder" in names and "shopify__setInventoryLevel" not in names
    assert second.messages[-1]["role"] == "tool" and "#1001" in second.messages[-1]["content"]
    assert rating.body["max_tokens"] == 5
    [call] = receiver.tool_calls
    assert call["authorization"] == "Bearer agent-token-1"
    assert (call["tool"], call["action"], call["params"]) == (
        "shopify",
        "getOrder",
        {"id": "5600000000101"},
    )
    assert call["task"] is None and call["step"] is None
    audits = receiver.of_type("llm.called")
    assert [a["payload"]["purpose"] for a in audits] == ["chat", "chat", "confidence"]
    assert audits[0]["payload"]["model"] == "openai/gpt-4o"
    assert audits[0]["payload"]["promptTokens"] > 0 and audits[0]["payload"]["latencyMs"] >= 0
    assert receiver.of_type("tool.called")[0]["payload"]["purpose"] == "chat"
    await made.http.aclose()


async def test_a_write_asked_for_in_chat_is_refused_to_the_model(
    tmp_path: Path, receiver: Receiver, llm: FakeOpenAI
) -> None:
    made = await make_agent(tmp_path, receiver, llm_base_url=llm.url)
    llm.tool_call(
        "shopify__setInventoryLevel", {"location_id": 1, "inventory_item_id": 2, "available": 0}
    )
    llm.reply("I need an expert's approval for that.")
    llm.reply("6")
    body = (await made.post("/v1/chat", {"message": "Set the mug stock to 0"})).json()
    assert body["reply"] == "I need an expert's approval for that."
    assert receiver.tool_calls == []  # nothing reached the proxy
    assert "expert approves" in llm.requests[1].messages[-1]["content"]
    assert body["flag_for_review"] is True  # high risk and 0.6 < 0.7
    await made.http.aclose()


async def test_a_model_reply_streams_and_a_dead_model_falls_back(
    tmp_path: Path, receiver: Receiver, llm: FakeOpenAI
) -> None:
    made = await make_agent(tmp_path, receiver, llm_base_url=llm.url)
    llm.reply("It ships on Monday.")
    llm.reply("9")
    raw, headers = sign({"message": "When does it ship?"})
    answer = await made.http.post("/v1/chat/stream", content=raw, headers=headers)
    events = parse_sse(answer.text)
    assert "".join(d["text"] for k, d in events if k == "token") == "It ships on Monday."
    assert events[-1][1]["confidence"] == 0.9 and events[-1][1]["responder"] == "llm"
    llm.fail(500, times=10)
    made.runtime.llm.backoff = 0.01  # type: ignore[union-attr]
    body = (await made.post("/v1/chat", {"message": "When does it ship?"})).json()
    assert body["responder"] == "offline" and body["model"] == "offline"
    status = (await made.http.get("/v1/status")).json()
    assert status["llm"]["mode"] == "offline" and "500" in status["llm"]["lastError"]
    await made.http.aclose()


# --- configuration ---------------------------------------------------------------------------


async def test_configure_overlays_the_configmap_and_reports_the_hash(agent: Agent) -> None:
    file_hash = agent.runtime.holder.current.config_hash
    answer = await agent.post(
        "/v1/configure",
        {
            "specialist": {"system_prompt": "You are Alice."},
            "model": "anthropic/claude-sonnet-4",
            "confidence_threshold": 90,
            "enabled_tools": ["shopify"],
            "defaultMode": "agentic",
            "by": "admin@example.com",
        },
    )
    body = answer.json()
    assert answer.status_code == 200 and body["configHash"] != file_hash
    assert body["config"]["specialist"] == {"name": "Bob", "systemPrompt": "You are Alice."}
    assert body["config"]["confidenceThreshold"] == 90
    assert (await agent.http.get("/v1/status")).json()["model"] == "anthropic/claude-sonnet-4"
    assert (await agent.http.get("/v1/health")).json()["configHash"] == body["configHash"]
    [event] = receiver_events(agent, "config.applied")
    assert event["payload"]["configHash"] == body["configHash"]
    assert event["payload"]["configMapHash"] == file_hash
    assert event["payload"]["changed"] == [
        "confidenceThreshold",
        "defaultMode",
        "enabledTools",
        "model",
        "specialist",
    ]
    chat = (await agent.post("/v1/chat", {"message": "Where is my order?"})).json()
    assert chat["mode"] == "agentic"  # defaultMode
    reset = (await agent.post("/v1/configure", {"reset": True})).json()
    assert reset["configHash"] == file_hash and reset["overlay"] == {}
    bad = await agent.post("/v1/configure", {"confidence_threshold": 150})
    assert bad.status_code == 422 and bad.json()["code"] == "validation_failed"
    empty = await agent.post("/v1/configure", {})
    assert empty.status_code == 422


def receiver_events(agent: Agent, event_type: str) -> list[dict[str, Any]]:
    url = agent.settings.callback_url
    assert url.endswith("/v1/agent-events")
    rec: Receiver = RECEIVERS[url]
    return rec.of_type(event_type)


RECEIVERS: dict[str, Receiver] = {}


@pytest.fixture(autouse=True)
def _remember(receiver: Receiver) -> None:
    RECEIVERS[f"{receiver.url}/v1/agent-events"] = receiver


async def test_a_new_configmap_is_picked_up_and_announced(
    tmp_path: Path, receiver: Receiver
) -> None:
    made = await make_agent(tmp_path, receiver, config_poll_seconds=0.05)
    ran: list[str] = []

    async def job(runtime: Runtime) -> None:
        ran.append(runtime.settings.agent_name)
        await asyncio.Event().wait()

    app = create_app(made.settings, runtime=made.runtime, background=[job])
    async with app.router.lifespan_context(app):
        await asyncio.sleep(0.1)
        assert ran == ["acme"]
        data = json.loads(made.settings.config_file.read_text())
        data["model"] = "openai/gpt-4o-mini"
        made.settings.config_file.write_text(
            json.dumps(data, sort_keys=True, separators=(",", ":"))
        )
        for _ in range(50):
            if receiver.of_type("config.applied"):
                break
            await asyncio.sleep(0.05)
    [event] = receiver.of_type("config.applied")
    assert event["payload"]["source"] == "configmap"
    assert event["payload"]["model"] == "openai/gpt-4o-mini"
    assert made.runtime.config().model == "openai/gpt-4o-mini"


# --- tasks -----------------------------------------------------------------------------------


async def test_a_request_becomes_an_agentic_task_and_a_plan_ready_event(agent: Agent) -> None:
    conversation = "9b2f6c1e-1d4a-4e9b-9c51-2a6f0d8e4b17"
    answer = await agent.post(
        "/v1/tasks",
        {
            "request": SEED_EXAMPLE,
            "requester": "client@example.com",
            "conversationId": conversation,
            "planRequest": "plan-request-1",
        },
    )
    assert answer.status_code == 201, answer.text
    body = answer.json()
    name = body["name"]
    assert name.startswith("acme-") and body["created"] is True and body["planner"] == "offline"
    assert [(s["tool"], s["risk"]) for s in body["steps"]] == [
        ("amazon", "low"),
        ("shopify", "high"),
    ]
    created = agent.kube.objects[name]
    assert created["spec"]["orgId"] == ORG
    assert created["spec"]["agentRef"] == {"name": "acme"}
    # the agent names itself; the platform binds the requester through the request's id
    assert created["spec"]["requestedBy"] == "agent:acme"
    assert created["metadata"]["annotations"]["humanwork.io/plan-request"] == "plan-request-1"
    assert created["spec"]["conversationId"] == conversation
    assert created["metadata"]["labels"]["humanwork.io/agent"] == "acme"
    assert created["metadata"]["namespace"] == "org-acme"
    post = next(r for r in agent.kube.requests if r.method == "POST")
    assert post.headers["authorization"] == "Bearer agent-token-1"  # the token file (the SA's)
    [ready] = receiver_events(agent, "task.plan_ready")
    assert ready["task_id"] == name and ready["org_id"] == ORG
    assert ready["payload"]["steps"] == created["spec"]["steps"]
    assert ready["payload"]["requestedBy"] == "client@example.com"


async def test_a_retried_request_with_its_idempotency_key_makes_one_task(agent: Agent) -> None:
    body = {"request": SEED_EXAMPLE, "requester": "client@example.com"}
    first = await agent.post("/v1/tasks", body, **{"Idempotency-Key": "req-1"})
    second = await agent.post("/v1/tasks", body, **{"Idempotency-Key": "req-1"})
    other = await agent.post("/v1/tasks", body, **{"Idempotency-Key": "req-2"})
    in_body = await agent.post("/v1/tasks", {**body, "idempotencyKey": "req-1"})
    assert (first.status_code, second.status_code, other.status_code) == (201, 200, 201)
    assert first.json()["name"] == second.json()["name"] != other.json()["name"]
    assert second.json()["created"] is False and second.json()["steps"] == first.json()["steps"]
    assert in_body.status_code == 200 and in_body.json()["name"] == first.json()["name"]
    assert len(agent.kube.objects) == 2
    assert len(receiver_events(agent, "task.plan_ready")) == 2


async def test_a_revision_names_the_rejected_task_and_plans_around_its_feedback(
    agent: Agent,
) -> None:
    first = (
        await agent.post("/v1/tasks", {"request": "Update inventory in Shopify", "requester": "c"})
    ).json()
    agent.kube.objects[first["name"]]["status"] = {
        "steps": [
            {
                "id": "step-1",
                "decision": {"verdict": "reject", "feedback": "only set SKU HW-PIN-07 to 12"},
            }
        ]
    }
    answer = await agent.post(
        "/v1/tasks",
        {"request": "Update inventory in Shopify", "requester": "c", "revises": first["name"]},
    )
    revised = answer.json()
    assert answer.status_code == 201
    assert agent.kube.objects[revised["name"]]["spec"]["revisionOf"] == first["name"]
    assert revised["steps"][0]["parameters"]["action"] == "setInventoryLevel"
    unknown = await agent.post("/v1/tasks", {"request": "x", "requester": "c", "revises": "nope"})
    assert unknown.status_code == 422


async def test_a_refusal_of_the_api_server_is_reported(agent: Agent) -> None:
    agent.kube.refuse = (403, "agentictasks is forbidden: User cannot create")
    answer = await agent.post("/v1/tasks", {"request": SEED_EXAMPLE, "requester": "c"})
    assert answer.status_code == 502
    assert answer.json()["code"] == "kubernetes_refused"
    assert answer.json()["details"]["status"] == 403
    assert receiver_events(agent, "task.plan_ready") == []
    bad = await agent.post(
        "/v1/tasks", {"request": SEED_EXAMPLE, "requester": "c", "conversationId": "not-a-uuid"}
    )
    assert bad.status_code == 422


async def test_cancel_is_recorded_by_the_agent_and_announced(agent: Agent) -> None:
    name = (await agent.post("/v1/tasks", {"request": SEED_EXAMPLE, "requester": "c"})).json()[
        "name"
    ]
    stopped: list[str] = []

    async def hook(task: str) -> None:
        stopped.append(task)

    agent.runtime.on_cancel.append(hook)
    answer = await agent.post(
        f"/v1/tasks/{name}/cancel", {"reason": "client changed mind", "by": "e"}
    )
    assert answer.status_code == 202
    assert answer.json() == {
        "task": name,
        "cancelled": True,
        "alreadyCancelled": False,
        "scope": "agent",
    }
    assert agent.runtime.is_cancelled(name) and stopped == [name]
    [event] = receiver_events(agent, "error")
    assert event["task_id"] == name and event["payload"]["code"] == "task_cancelled"
    assert event["payload"]["reason"] == "client changed mind"
    again = await agent.post(f"/v1/tasks/{name}/cancel", {})
    assert again.json()["alreadyCancelled"] is True and len(receiver_events(agent, "error")) == 1
    # the agent wrote nothing to the task: its identity may not write the phase
    assert all(r.method in ("GET", "POST") for r in agent.kube.requests)
    # a restarted agent still knows
    assert build_runtime(agent.settings, kube=agent.kube.client(agent.settings)).is_cancelled(name)
    assert (await agent.post("/v1/tasks/nope/cancel", {})).status_code == 404
    agent.kube.objects[name]["status"] = {"phase": "Completed"}
    done = await agent.post(f"/v1/tasks/{name}/cancel", {})
    assert (done.status_code, done.json()["code"]) == (409, "task_terminal")
