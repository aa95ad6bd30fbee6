"""The agent's client of the platform's agent API: the tool proxy body, the agent token
re-read on every call, retries with the same idempotency key, and refusals as typed
errors carrying the platform's JSON error."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from agent_image.platform import PlatformClient, PlatformError, ToolCallError
from tests.unit.test_agent_events import TOKEN, agent_settings


class Platform:
    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []
        self.answers: list[httpx.Response | Exception] = []

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.answers:
            answer = self.answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer
        return httpx.Response(
            200,
            json={
                "tool": "shopify",
                "action": "x",
                "result": {"ok": True},
                "replayed": False,
                "sideEffecting": True,
            },
        )


def make(tmp_path: Path, platform: Platform) -> PlatformClient:
    settings = agent_settings(tmp_path, "http://platform.test")
    http = httpx.AsyncClient(transport=httpx.MockTransport(platform.handler))
    return PlatformClient(settings, http, attempts=3, backoff=0.01)


async def test_a_tool_call_sends_the_proxy_body_with_the_token(tmp_path: Path) -> None:
    platform = Platform()
    client = make(tmp_path, platform)
    answer = await client.call_tool(
        "shopify",
        "adjustInventoryLevel",
        {"location_id": 1, "inventory_item_id": 2, "available_adjustment": -3},
        "uid/step-2",
        "acme-1",
        "step-2",
    )
    assert answer["result"] == {"ok": True}
    [request] = platform.requests
    assert request.method == "POST"
    assert str(request.url) == "http://platform.test/v1/agent-api/tools/shopify"
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    assert request.headers["idempotency-key"] == "uid/step-2"
    assert json.loads(request.content) == {
        "action": "adjustInventoryLevel",
        "params": {"location_id": 1, "inventory_item_id": 2, "available_adjustment": -3},
        "idempotencyKey": "uid/step-2",
        "task": "acme-1",
        "step": "step-2",
    }


async def test_a_gateway_error_or_a_lost_connection_is_retried_with_the_same_key(
    tmp_path: Path,
) -> None:
    platform = Platform()
    platform.answers += [
        httpx.Response(503, json={"code": "unavailable", "message": "later", "details": {}}),
        httpx.ConnectError("refused"),
    ]
    client = make(tmp_path, platform)
    await client.call_tool("amazon", "listOrders", {}, "key-1", None, None)
    assert len(platform.requests) == 3
    assert {json.loads(r.content)["idempotencyKey"] for r in platform.requests} == {"key-1"}


async def test_a_refusal_carries_the_platforms_error(tmp_path: Path) -> None:
    platform = Platform()
    platform.answers.append(
        httpx.Response(
            403,
            json={
                "code": "step_not_approved",
                "message": "the step has no approving decision",
                "details": {"reason": "not_approved", "step": "step-2"},
            },
        )
    )
    client = make(tmp_path, platform)
    with pytest.raises(ToolCallError) as refused:
        await client.call_tool("shopify", "setInventoryLevel", {}, "k", "t", "step-2")
    error = refused.value
    assert (error.status, error.code) == (403, "step_not_approved")
    assert error.details == {"reason": "not_approved", "step": "step-2"}
    assert error.to_dict()["message"] == "the step has no approving decision"
    assert len(platform.requests) == 1  # a refusal is final


async def test_retries_end_with_the_last_error(tmp_path: Path) -> None:
    platform = Platform()
    platform.answers += [httpx.ConnectError("refused")] * 3
    client = make(tmp_path, platform)
    with pytest.raises(ToolCallError) as failed:
        await client.call_tool("amazon", "listOrders", {}, "k", None, None)
    assert failed.value.status == 0 and failed.value.code == "platform_unreachable"
    platform.answers += [httpx.ConnectError("refused")]
    with pytest.raises(PlatformError):
        await client.call_tool("amazon", "listOrders", {}, "k", None, None, attempts=1)


async def test_reads_and_the_token_refresh(tmp_path: Path) -> None:
    platform = Platform()
    platform.answers += [
        httpx.Response(200, json={"messages": [{"role": "user", "content": "hi"}]}),
        httpx.Response(200, json={"results": [{"content": "Returns take 30 days."}]}),
        httpx.Response(202, json={"agentId": "org-acme/acme", "rotationRequestedAt": "now"}),
    ]
    client = make(tmp_path, platform)
    assert await client.messages("c-1") == [{"role": "user", "content": "hi"}]
    assert await client.context("returns", limit=3) == [{"content": "Returns take 30 days."}]
    assert (await client.refresh_token())["agentId"] == "org-acme/acme"
    paths = [(r.method, r.url.path, dict(r.url.params)) for r in platform.requests]
    assert paths == [
        ("GET", "/v1/agent-api/conversations/c-1/messages", {}),
        ("GET", "/v1/agent-api/context", {"query": "returns", "limit": "3"}),
        ("POST", "/v1/agent-api/token/refresh", {}),
    ]
    (tmp_path / "token").write_text("rotated")
    await client.messages("c-1")
    assert platform.requests[-1].headers["authorization"] == "Bearer rotated"
