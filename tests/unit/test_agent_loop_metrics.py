"""The agent's execution loop and its tool calls move their metrics when they happen.

The loop runs against a task store whose watch breaks once and whose first status write
fails (the API server blinking), so each error path is taken; the tool calls go through
the agent's real platform client to a proxy that answers with each outcome in turn; the
runtime as the agent builds it counts a read through the proxy (a real local server)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import generate_latest

from agent_image import executor as executor_module
from agent_image.executor import Checkpoints, Executor
from agent_image.metrics import AgentMetrics
from agent_image.platform import PlatformClient, PlatformError
from tests.unit.test_agent_app import make_agent
from tests.unit.test_agent_events import Receiver, agent_settings
from tests.unit.test_agent_events import receiver as receiver  # the fixture
from tests.unit.test_agent_metrics import parse, value
from tests.unit.test_executor_failures import Events, Proxy, Store, approved, ok, refusal
from tests.unit.test_step_retry import READ

CALLS = "humanwork_agent_tool_calls_total"
LATENCY = "humanwork_agent_tool_call_duration_seconds_count"


def samples(metrics: AgentMetrics) -> dict[Any, float]:
    return parse(generate_latest(metrics.registry).decode())


class Completion(Events):
    """The agent's events, with a flag raised when the task is completed."""

    def __init__(self) -> None:
        super().__init__()
        self.completed = asyncio.Event()

    async def emit(self, event_type: str, **fields: Any) -> None:
        await super().emit(event_type, **fields)
        if event_type == "task.completed":
            self.completed.set()


class Blinking(Store):
    """A task store whose first watch breaks and whose first status write fails."""

    def __init__(self, store: Store) -> None:
        self.raw = store.raw
        self.watches = 0
        self.writes = 0
        self.forever = asyncio.Event()

    async def watch_tasks(self, resource_version: str) -> AsyncIterator[tuple[str, Any]]:
        self.watches += 1
        if self.watches == 1:
            raise RuntimeError("410 Gone: the watch expired")
        await self.forever.wait()
        yield "", {}

    async def apply_task_status(
        self, name: str, patch: dict[str, Any], field_manager: str, force: bool = True
    ) -> dict[str, Any]:
        self.writes += 1
        if self.writes == 1:
            raise RuntimeError("the API server blinked")
        return await super().apply_task_status(name, patch, field_manager, force)


async def test_loop_rounds_and_errors_and_the_tool_call_are_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(executor_module, "RETRY_SECONDS", 0.01)
    metrics = AgentMetrics()
    store = Blinking(approved(READ))
    events = Completion()
    proxy = Proxy(ok())
    async with httpx.AsyncClient(transport=httpx.MockTransport(proxy.handler)) as http:
        platform = PlatformClient(agent_settings(tmp_path, "http://platform.test"), http)
        platform.observe_tool = metrics.tool_called
        loop = Executor(
            "acme-ecommerce",
            "org-acme",
            store,
            platform,
            events,
            Checkpoints(tmp_path / "checkpoints"),
            on_step=metrics.executed,
            on_loop=metrics.looped,
        )
        assert value(samples(metrics), "humanwork_agent_loop_iterations_total") == 0
        running = asyncio.create_task(loop.run())
        try:
            await asyncio.wait_for(events.completed.wait(), timeout=30)
        finally:
            running.cancel()
    found = samples(metrics)
    errors = "humanwork_agent_loop_errors_total"
    assert value(found, errors, stage="watch") == 1
    assert value(found, errors, stage="task") == 1
    # the failed round, the round that ran the step, the round that found nothing left
    assert value(found, "humanwork_agent_loop_iterations_total") >= 2
    steps = "humanwork_agent_step_executions_total"
    assert value(found, steps, tool="shopify", outcome="succeeded") == 1
    assert value(found, CALLS, tool="shopify", outcome="ok") == 1
    assert value(found, LATENCY, tool="shopify") == 1
    assert len(proxy.requests) == 1


@pytest.mark.parametrize(
    ("answer", "outcome"),
    [
        (ok(), "ok"),
        (refusal(403, "tool_not_enabled", "not enabled for this org"), "refused"),
        (
            refusal(502, "upstream_error", "Shopify answered 500", upstreamStatus="500"),
            "upstream_error",
        ),
        (refusal(503, "platform_busy", "try again"), "unavailable"),
        (httpx.ConnectError("refused"), "unavailable"),
        (refusal(409, "tool_call_outcome_unknown", "timed out after sending"), "unknown"),
        (refusal(409, "tool_call_in_progress", "another call holds it"), "busy"),
    ],
)
async def test_each_tool_call_is_counted_by_its_outcome_and_timed(
    tmp_path: Path, answer: httpx.Response | Exception, outcome: str
) -> None:
    metrics = AgentMetrics()
    proxy = Proxy(answer)
    async with httpx.AsyncClient(transport=httpx.MockTransport(proxy.handler)) as http:
        platform = PlatformClient(
            agent_settings(tmp_path, "http://platform.test"), http, attempts=1, backoff=0.0
        )
        platform.observe_tool = metrics.tool_called
        try:
            await platform.call_tool("shopify_query", "getOrder", {"id": 1}, "k-1", None, None)
        except Exception as exc:
            assert outcome != "ok", exc
    found = samples(metrics)
    assert value(found, CALLS, tool="shopify", outcome=outcome) == 1
    assert sum(v for (name, _), v in found.items() if name == CALLS) == 1
    assert value(found, LATENCY, tool="shopify") == 1


async def test_the_agents_runtime_counts_its_reads_through_the_proxy(
    tmp_path: Path, receiver: Receiver
) -> None:
    made = await make_agent(tmp_path, receiver)
    receiver.tool_answers[("shopify", "getOrder")] = {"order": {"id": 1}}
    await made.runtime.read_tool("shopify", "getOrder", {"id": 1})
    with pytest.raises(PlatformError):
        await made.runtime.read_tool("amazon", "nothingScripted", {})
    found = samples(made.runtime.metrics)
    assert value(found, CALLS, tool="shopify", outcome="ok") == 1
    assert value(found, CALLS, tool="amazon", outcome="refused") == 1
    await made.http.aclose()


def test_the_new_label_values_stay_bounded() -> None:
    metrics = AgentMetrics()
    metrics.tool_called('evil"} 1\nhumanwork_x{a="', "exploded", 0.1)
    metrics.tool_called("web", "ok", -1.0)
    metrics.looped("a stage nobody knows")
    found = samples(metrics)
    assert value(found, CALLS, tool="other", outcome="other") == 1
    assert value(found, CALLS, tool="web", outcome="ok") == 1
    assert value(found, "humanwork_agent_loop_errors_total", stage="other") == 1
    assert value(found, "humanwork_agent_tool_call_duration_seconds_sum", tool="web") == 0
