"""Agent -> platform events: signed with the instance's secret (verified here with
humanwork_core.signing against a real local HTTP receiver), carrying the idempotency key
and the agent token, retried with the same key, kept in an outbox when the platform is
down, and never raising into the caller."""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agent_image.events import EVENT_TYPES, EventSender
from agent_image.settings import AgentSettings
from humanwork_core import signing
from humanwork_dev.fakes.server import BackgroundServer

ORG = "3f2b8c1e-7d4a-4e9b-9c51-2a6f0d8e4b17"
SECRET = "c0ffee" * 10 + "abcd"
TOKEN = "agent-token-1"


@dataclass(frozen=True)
class Received:
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(self.body)
        return loaded


class Receiver:
    """A real local HTTP server standing in for the platform's event endpoint (and, for
    the other agent tests, its tool proxy): records every request; answers with the
    queued statuses first, 202 after."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.received: list[Received] = []
        self.statuses: deque[int] = deque()
        self.tool_answers: dict[tuple[str, str], dict[str, Any]] = {}
        self.tool_handler: Callable[[str, str, dict[str, Any]], dict[str, Any]] | None = None
        """Answers reads by (tool, action, params) when set (else `tool_answers`)."""
        self.tool_calls: list[dict[str, Any]] = []

        async def events(request: Request) -> Response:
            body = await request.body()
            with self.lock:
                self.received.append(Received(dict(request.headers), body))
                status = self.statuses.popleft() if self.statuses else 202
            return JSONResponse({"accepted": status < 300}, status)

        async def tools(request: Request) -> Response:
            tool = request.path_params["tool"]
            body = json.loads(await request.body())
            with self.lock:
                self.tool_calls.append(
                    {"tool": tool, **body, "authorization": request.headers.get("authorization")}
                )
            result = self.tool_answers.get((tool, body["action"]))
            if self.tool_handler is not None:
                try:
                    result = self.tool_handler(tool, body["action"], body.get("params") or {})
                except LookupError:
                    result = None
            if result is None:
                return JSONResponse(
                    {"code": "unknown_action", "message": "not scripted", "details": {}}, 404
                )
            return JSONResponse(
                {
                    "tool": tool,
                    "action": body["action"],
                    "result": result,
                    "replayed": False,
                    "sideEffecting": False,
                }
            )

        app = Starlette(
            routes=[
                Route("/v1/agent-events", events, methods=["POST"]),
                Route("/v1/agent-api/tools/{tool}", tools, methods=["POST"]),
            ]
        )
        self.server = BackgroundServer(app)

    @property
    def url(self) -> str:
        return self.server.url

    def events(self) -> list[Received]:
        with self.lock:
            return list(self.received)

    def of_type(self, event_type: str) -> list[dict[str, Any]]:
        return [r.json for r in self.events() if r.json["event_type"] == event_type]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    rec = Receiver()
    rec.server.start()
    yield rec
    rec.server.stop()


def agent_settings(tmp_path: Path, platform_url: str, **extra: Any) -> AgentSettings:
    """Settings as the operator's pod spec gives them, with its files in `tmp_path`."""
    (tmp_path / "token").write_text(TOKEN + "\n")
    (tmp_path / "secret").write_text(SECRET + "\n")
    config = tmp_path / "config.json"
    if not config.exists():
        config.write_text(
            json.dumps(
                {
                    "confidenceThreshold": 70,
                    "enabledTools": ["amazon", "shopify"],
                    "maxConcurrentTasks": 3,
                    "model": "openai/gpt-4o",
                    "specialist": {"name": "Bob", "systemPrompt": "You are Bob."},
                    "temperature": 0.3,
                },
                sort_keys=True,
                separators=(",", ":"),
            )
        )
    values: dict[str, Any] = {
        "agent_id": "org-acme/acme",
        "agent_name": "acme",
        "org_id": ORG,
        "namespace": "org-acme",
        "platform_url": platform_url,
        "callback_url": f"{platform_url}/v1/agent-events",
        "token_file": tmp_path / "token",
        "callback_secret_file": tmp_path / "secret",
        "config_file": config,
        "kube_api_dir": tmp_path / "kube",
        "state_dir": tmp_path / "state",
        "llm_base_url": "",
    }
    values.update(extra)
    return AgentSettings(**values)


def now() -> datetime:
    return datetime.now(UTC)


async def test_an_event_is_signed_with_the_instance_secret_and_carries_its_key(
    tmp_path: Path, receiver: Receiver
) -> None:
    settings = agent_settings(tmp_path, receiver.url)
    async with httpx.AsyncClient() as http:
        sender = EventSender(settings, http)
        await sender.emit(
            "task.step_completed",
            task_id="acme-1",
            step_id="step-2",
            payload={"result": {"updated": 1}},
            idempotency_key="k-1",
        )
    [got] = receiver.events()
    header = got.headers[signing.SIGNATURE_HEADER.lower()]
    signing.verify(SECRET, header, got.body, now())  # raises when wrong
    with pytest.raises(signing.SignatureMismatch):
        signing.verify("another-secret", header, got.body, now())
    with pytest.raises(signing.SignatureMismatch):
        signing.verify(SECRET, header, got.body.replace(b"step-2", b"step-3"), now())
    assert got.headers["idempotency-key"] == "k-1"
    assert got.headers["authorization"] == f"Bearer {TOKEN}"
    body = got.json
    assert body == {
        "event_type": "task.step_completed",
        "agent_id": "org-acme/acme",
        "org_id": ORG,
        "task_id": "acme-1",
        "step_id": "step-2",
        "timestamp": body["timestamp"],
        "payload": {"result": {"updated": 1}},
        "idempotency_key": "k-1",
    }
    assert datetime.fromisoformat(body["timestamp"]).tzinfo is not None
    assert body["timestamp"].endswith("Z")


async def test_the_key_defaults_to_a_uuid_and_every_seed_type_is_known(
    tmp_path: Path, receiver: Receiver
) -> None:
    assert {
        "task.plan_ready",
        "task.step_started",
        "task.step_completed",
        "task.step_failed",
        "task.step_outcome_unknown",
        "task.completed",
        "task.needs_input",
        "tool.called",
        "llm.called",
        "error",
        "config.applied",
    } == EVENT_TYPES
    settings = agent_settings(tmp_path, receiver.url)
    async with httpx.AsyncClient() as http:
        sender = EventSender(settings, http)
        await sender.emit("llm.called", payload={"model": "m"})
        await sender.emit("llm.called", payload={"model": "m"})
        await sender.emit("not.a.type", payload={})  # logged, dropped, no exception
    keys = [r.json["idempotency_key"] for r in receiver.events()]
    assert len(keys) == 2 and keys[0] != keys[1] and len(keys[0]) == 36


async def test_a_5xx_is_retried_with_the_same_key_and_a_fresh_signature(
    tmp_path: Path, receiver: Receiver
) -> None:
    settings = agent_settings(tmp_path, receiver.url)
    receiver.statuses.extend([503, 500])
    async with httpx.AsyncClient() as http:
        sender = EventSender(settings, http, attempts=3, backoff=0.01)
        await sender.emit("task.completed", task_id="t", payload={}, idempotency_key="same")
        assert sender.outbox_size == 0 and sender.delivered == 1
    got = receiver.events()
    assert len(got) == 3
    assert {r.headers["idempotency-key"] for r in got} == {"same"}
    assert len({r.body for r in got}) == 1  # the very same event, byte for byte
    for r in got:
        signing.verify(SECRET, r.headers[signing.SIGNATURE_HEADER.lower()], r.body, now())


async def test_undelivered_events_wait_in_the_outbox_and_keep_their_order(
    tmp_path: Path, receiver: Receiver
) -> None:
    settings = agent_settings(tmp_path, receiver.url)
    receiver.statuses.extend([503, 503])
    async with httpx.AsyncClient() as http:
        sender = EventSender(settings, http, attempts=2, backoff=0.01)
        await sender.emit("task.step_started", payload={"n": 1}, idempotency_key="e1")
        assert sender.outbox_size == 1
        # the platform is back: the next event goes out behind the first one
        await sender.emit("task.step_completed", payload={"n": 2}, idempotency_key="e2")
        assert sender.outbox_size == 0
    delivered = [r.json["idempotency_key"] for r in receiver.events()[2:]]
    assert delivered == ["e1", "e2"]


async def test_an_unreachable_platform_never_raises_and_the_outbox_is_bounded(
    tmp_path: Path,
) -> None:
    settings = agent_settings(tmp_path, "http://127.0.0.1:9")  # nothing listens there
    async with httpx.AsyncClient() as http:
        sender = EventSender(settings, http, attempts=2, backoff=0.01, max_outbox=3)
        for n in range(5):
            await sender.emit("error", payload={"n": n})
        assert sender.outbox_size == 3 and sender.dropped == 2
        assert await sender.flush() == 0


async def test_a_refused_event_is_dropped_and_a_rotated_secret_is_used_at_once(
    tmp_path: Path, receiver: Receiver
) -> None:
    settings = agent_settings(tmp_path, receiver.url)
    receiver.statuses.append(422)
    async with httpx.AsyncClient() as http:
        sender = EventSender(settings, http, attempts=3, backoff=0.01)
        await sender.emit("error", payload={}, idempotency_key="bad")
        assert sender.dropped == 1 and sender.outbox_size == 0
        assert len(receiver.events()) == 1  # not retried
        settings.callback_secret_file.write_text("rotated-secret")
        await sender.emit("error", payload={}, idempotency_key="after")
    last = receiver.events()[-1]
    signing.verify("rotated-secret", last.headers["x-humanwork-signature"], last.body, now())
