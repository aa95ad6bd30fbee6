"""The OpenAI-compatible client against a real local fake server: what it sends (model,
key, messages, tools), what it parses (content, tool calls, usage), streaming, and
retries with backoff on 429, 5xx and dead endpoints."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from agent_image.llm import (
    Completion,
    Delta,
    LLMClient,
    LLMError,
    cost_estimate,
    llm_configured,
)
from humanwork_dev.fakes.openai_server import FakeOpenAI

KEY = "sk-test-key"
MESSAGES = [
    {"role": "system", "content": "You are Bob."},
    {"role": "user", "content": "Where is my order?"},
]


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
async def llm(fake: FakeOpenAI) -> AsyncIterator[LLMClient]:
    client = LLMClient(fake.url, KEY, timeout=5, max_retries=3, backoff=0.01)
    yield client
    await client.aclose()


async def test_a_completion_sends_model_key_and_messages_and_returns_usage(
    fake: FakeOpenAI, llm: LLMClient
) -> None:
    fake.reply(
        "It ships tomorrow.",
        usage={"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16},
    )
    answer = await llm.complete(MESSAGES, model="openai/gpt-4o", temperature=0.3, max_tokens=50)
    assert answer.content == "It ships tomorrow."
    assert answer.model == "openai/gpt-4o"
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (12, 4)
    assert answer.usage.total_tokens == 16 and answer.attempts == 1
    assert answer.latency_ms > 0 and answer.finish_reason == "stop"
    [sent] = fake.requests
    assert sent.authorization == f"Bearer {KEY}"
    assert sent.body["model"] == "openai/gpt-4o"
    assert sent.body["messages"] == MESSAGES
    assert sent.body["temperature"] == 0.3 and sent.body["max_tokens"] == 50
    assert "stream" not in sent.body
    audit = answer.audit("chat")
    assert audit["model"] == "openai/gpt-4o" and audit["totalTokens"] == 16
    assert audit["costUsd"] == pytest.approx((12 * 2.5 + 4 * 10) / 1e6)


async def test_tool_calls_are_parsed_with_their_arguments(fake: FakeOpenAI, llm: LLMClient) -> None:
    fake.tool_call("shopify__getOrder", {"id": "1234"})
    tools = [
        {
            "type": "function",
            "function": {"name": "shopify__getOrder", "parameters": {"type": "object"}},
        }
    ]
    answer = await llm.complete(MESSAGES, model="m", tools=tools, tool_choice="auto")
    [call] = answer.tool_calls
    assert call.name == "shopify__getOrder" and call.arguments == {"id": "1234"}
    assert answer.finish_reason == "tool_calls"
    assert fake.requests[0].body["tools"] == tools
    assert fake.requests[0].body["tool_choice"] == "auto"


async def test_arguments_that_are_not_json_are_an_error(fake: FakeOpenAI, llm: LLMClient) -> None:
    fake.tool_call("propose_plan", "{not json")
    with pytest.raises(LLMError, match="not JSON"):
        await llm.complete(MESSAGES, model="m")


async def test_streaming_yields_pieces_then_the_whole_completion(
    fake: FakeOpenAI, llm: LLMClient
) -> None:
    fake.reply("Your order ships tomorrow morning.")
    items = [item async for item in llm.stream(MESSAGES, model="m")]
    pieces = [i.text for i in items if isinstance(i, Delta)]
    final = items[-1]
    assert isinstance(final, Completion)
    assert len(pieces) == 5 and "".join(pieces) == "Your order ships tomorrow morning."
    assert final.content == "Your order ships tomorrow morning."
    assert final.usage.total_tokens > 0  # stream_options.include_usage honoured
    sent = fake.requests[0].body
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}


async def test_streamed_tool_calls_are_put_together(fake: FakeOpenAI, llm: LLMClient) -> None:
    fake.tool_call("amazon__listOrders", {"CreatedAfter": "2026-10-01T00:00:00Z"})
    items = [item async for item in llm.stream(MESSAGES, model="m")]
    final = items[-1]
    assert isinstance(final, Completion)
    [call] = final.tool_calls
    assert call.name == "amazon__listOrders"
    assert call.arguments == {"CreatedAfter": "2026-10-01T00:00:00Z"}


async def test_429_and_5xx_are_retried_with_backoff(fake: FakeOpenAI, llm: LLMClient) -> None:
    fake.fail(429, retry_after=0)
    fake.fail(500)
    fake.fail(503)
    fake.reply("finally")
    answer = await llm.complete(MESSAGES, model="m")
    assert answer.content == "finally" and answer.attempts == 4
    assert len(fake.requests) == 4
    assert {r.body["model"] for r in fake.requests} == {"m"}


async def test_retries_are_bounded(fake: FakeOpenAI, llm: LLMClient) -> None:
    fake.fail(500, times=10)
    with pytest.raises(LLMError) as failed:
        await llm.complete(MESSAGES, model="m")
    assert failed.value.status == 500 and failed.value.attempts == 4
    assert len(fake.requests) == 4


async def test_a_client_error_is_not_retried(fake: FakeOpenAI, llm: LLMClient) -> None:
    fake.fail(401, message="invalid api key")
    with pytest.raises(LLMError, match="invalid api key") as failed:
        await llm.complete(MESSAGES, model="m")
    assert failed.value.status == 401 and len(fake.requests) == 1


async def test_a_stream_is_retried_before_its_first_byte(fake: FakeOpenAI, llm: LLMClient) -> None:
    fake.fail(502)
    fake.reply("streamed")
    items = [item async for item in llm.stream(MESSAGES, model="m")]
    assert isinstance(items[-1], Completion) and items[-1].content == "streamed"
    assert items[-1].attempts == 2


async def test_a_dead_endpoint_fails_after_the_retries() -> None:
    client = LLMClient("http://127.0.0.1:9/v1", KEY, timeout=2, max_retries=2, backoff=0.01)
    with pytest.raises(LLMError, match="unreachable") as failed:
        await client.complete(MESSAGES, model="m")
    assert failed.value.attempts == 3
    await client.aclose()


async def test_a_slow_model_times_out_and_is_retried(fake: FakeOpenAI) -> None:
    fake.reply("too late", delay=1.0)
    fake.reply("in time")
    client = LLMClient(fake.url, KEY, timeout=0.3, max_retries=1, backoff=0.01)
    answer = await client.complete(MESSAGES, model="m")
    assert answer.content == "in time"
    await client.aclose()


def test_which_base_urls_mean_a_model_is_configured() -> None:
    assert llm_configured("https://openrouter.ai/api/v1")
    assert llm_configured("http://127.0.0.1:8000/v1")
    assert not llm_configured("")
    assert not llm_configured("   ")
    assert not llm_configured(None)
    assert not llm_configured("https://llm.example/v1")  # RFC 2606: never resolves
    assert not llm_configured("https://model.invalid/v1")
    assert not llm_configured("ftp://llm.host/v1")


def test_cost_estimates() -> None:
    assert cost_estimate("openai/gpt-4o-mini", 1_000_000, 0) == pytest.approx(0.15)
    assert cost_estimate("gpt-4o", 1000, 1000) == pytest.approx(0.0125)
    assert cost_estimate("some/unknown-model", 10, 10) is None
