"""The agent's Prometheus metrics (issue 17, item 4, "and on the agent"), without a cluster.

The agent app runs its lifespan with its metrics served on a real local port; the model is
the fake OpenAI server and the platform's event endpoint a real local receiver. Replies
(auto / flagged), model calls by outcome with their latency, configuration reloads and the
events delivered are counted; the label values stay bounded whatever a task names; nothing
secret or from the conversation reaches the scrape; the command API serves no metrics and
the settings refuse metrics on the command port. The operator's half: the pod declares the
`metrics` port and the NetworkPolicy opens it only to the configured scrapers (the
policy as the real API server holds it: tests/integration/test_operator_network.py; the
agent as a process: tests/e2e/test_agent_metrics.py)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from pydantic import ValidationError

from agent_image.executor import Checkpoints, Executor
from agent_image.metrics import AgentMetrics, tool_label
from agent_image.platform import PlatformClient
from agent_image.settings import AgentSettings
from agent_operator import builders
from agent_operator.config import OperatorSettings
from humanwork_core import taskflow
from humanwork_dev.cluster import free_port
from humanwork_dev.fakes.openai_server import FakeOpenAI
from tests.unit.test_agent_app import Agent, make_agent
from tests.unit.test_agent_events import SECRET, TOKEN, Receiver, agent_settings
from tests.unit.test_agent_events import receiver as receiver  # the fixture
from tests.unit.test_builders import instance
from tests.unit.test_executor_failures import Events, Proxy, Store, approved, ok, refusal
from tests.unit.test_step_retry import READ
from tests.unit.test_step_retry import SET as WRITE

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    """Every sample of a scrape, by (name, sorted labels), with Prometheus's own parser."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def scrape(url: str) -> tuple[str, Samples]:
    async with httpx.AsyncClient() as http:
        answer = await http.get(url, timeout=5)
    assert answer.status_code == 200, answer.text
    return answer.text, parse(answer.text)


@pytest.fixture
def llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


async def test_replies_model_calls_reloads_and_events_are_counted_on_their_own_port(
    tmp_path: Path, receiver: Receiver, llm: FakeOpenAI
) -> None:
    port = free_port()
    made: Agent = await make_agent(
        tmp_path,
        receiver,
        llm_base_url=llm.url,
        llm_api_key="sk-agent-llm-key",
        agent_metrics_port=port,
        host="127.0.0.1",
        config_poll_seconds=0.05,
    )
    url = f"http://127.0.0.1:{port}/metrics"
    async with made.app.router.lifespan_context(made.app):
        _, before = await scrape(url)
        assert value(before, "humanwork_agent_chat_replies_total", responder="llm") == 0
        # a confident model reply (0.9, low risk): may be sent as is
        llm.reply("Your order 1001 shipped on Monday.", delay=0.05)
        llm.reply("9")
        auto = (await made.post("/v1/chat", {"message": "Where is my order 1001?"})).json()
        assert (auto["responder"], auto["flag_for_review"]) == ("llm", False)
        # the model refuses (400): the agent answers offline, for an expert to review
        llm.fail(400, message="quota of acme exceeded")
        flagged = (await made.post("/v1/chat", {"message": "Where is my order 1002?"})).json()
        assert (flagged["responder"], flagged["flag_for_review"]) == ("offline", True)
        # a pushed configuration, then a new ConfigMap file
        assert (await made.post("/v1/configure", {"confidenceThreshold": 80})).status_code == 200
        data = json.loads(made.settings.config_file.read_text())
        made.settings.config_file.write_text(json.dumps({**data, "model": "openai/gpt-4o-mini"}))
        # both reloads were told, and the sender counted every answer (the last answer
        # reaches the sender after the receiver logged the event)
        delivered = "humanwork_agent_events_total"
        deadline = time.monotonic() + 60
        while True:
            text, after = await scrape(url)
            sent = len(receiver.events())
            if receiver.of_type("config.applied")[1:] and (
                value(after, delivered, outcome="delivered") == sent
            ):
                break
            assert time.monotonic() < deadline, f"events not all counted as delivered: {text}"
            await asyncio.sleep(0.05)
        # the command API has no /metrics
        assert (await made.http.get("/metrics")).status_code == 404

    replies = "humanwork_agent_chat_replies_total"
    assert value(after, replies, responder="llm", review="auto") == 1
    assert value(after, replies, responder="offline", review="flagged") == 1
    assert value(after, replies, responder="llm", review="flagged") == 0
    calls = "humanwork_agent_llm_calls_total"
    assert value(after, calls, outcome="ok") == 2  # the reply and its confidence rating
    assert value(after, calls, outcome="refused") == 1
    assert value(after, "humanwork_agent_llm_call_duration_seconds_count") == 3
    assert value(after, "humanwork_agent_llm_call_duration_seconds_sum") >= 0.05
    reloads = "humanwork_agent_config_reloads_total"
    assert value(after, reloads, source="configure") == 1
    assert value(after, reloads, source="configmap") == 1
    sent = len(receiver.events())
    assert sent >= 4  # llm.called (x3), config.applied (x2)
    assert value(after, "humanwork_agent_events_total", outcome="delivered") == sent
    assert value(after, "humanwork_agent_events_total", outcome="dropped") == 0
    assert value(after, "humanwork_agent_event_outbox") == 0
    assert value(after, "humanwork_agent_running_tasks") == 0
    # nothing secret, nothing of the conversation
    for secret in ("sk-agent-llm-key", SECRET, TOKEN, "order 1001", "shipped", "quota"):
        assert secret not in text
    # the server is gone with the app
    with pytest.raises(httpx.ConnectError):
        await scrape(url)


async def test_undelivered_events_show_in_the_outbox_and_dropped_ones_are_counted(
    tmp_path: Path, receiver: Receiver
) -> None:
    made = await make_agent(tmp_path, receiver)
    metrics = made.runtime.metrics
    receiver.statuses.extend([503] * 3 + [400])
    await made.runtime.events.emit("error", payload={"code": "x"})  # kept for later
    samples = parse(_text(metrics))
    assert value(samples, "humanwork_agent_event_outbox") == 1
    await made.runtime.events.emit("error", payload={"code": "y"})  # flushes: 400, then 202
    samples = parse(_text(metrics))
    assert value(samples, "humanwork_agent_event_outbox") == 0
    assert value(samples, "humanwork_agent_events_total", outcome="dropped") == 1
    assert value(samples, "humanwork_agent_events_total", outcome="delivered") == 1
    made.runtime.track_task("acme-1", step="step-1")
    assert value(parse(_text(metrics)), "humanwork_agent_running_tasks") == 1
    await made.http.aclose()


def _text(metrics: AgentMetrics) -> str:
    return generate_latest(metrics.registry).decode()


def _settings_in(folder: Path) -> AgentSettings:
    folder.mkdir()
    return agent_settings(folder, "http://platform.test")


async def _execute(tmp_path: Path, store: Store, proxy: Proxy, metrics: AgentMetrics) -> None:
    """Run the store's approved step once, with the agent's real platform client."""
    settings = _settings_in(tmp_path)
    async with httpx.AsyncClient(transport=httpx.MockTransport(proxy.handler)) as http:
        executor = Executor(
            "acme-ecommerce",
            "org-acme",
            store,
            PlatformClient(settings, http, attempts=1, backoff=0.0),
            Events(),
            Checkpoints(tmp_path / "checkpoints"),
            retry_seconds=0.0,
            on_step=metrics.executed,
        )
        task = store.task()
        step = taskflow.executable_step(task)
        assert step is not None
        await executor.execute(task, step)


async def test_each_execution_is_counted_by_tool_and_outcome(tmp_path: Path) -> None:
    metrics = AgentMetrics()
    await _execute(tmp_path / "a", approved(READ), Proxy(ok()), metrics)
    upstream = refusal(502, "upstream_error", "Shopify answered 500", upstreamStatus="500")
    await _execute(tmp_path / "b", approved(READ), Proxy(upstream), metrics)
    lost = refusal(409, "tool_call_outcome_unknown", "the upstream timed out after sending")
    await _execute(tmp_path / "c", approved(WRITE), Proxy(lost), metrics)
    samples = parse(_text(metrics))
    steps = "humanwork_agent_step_executions_total"
    for outcome in ("succeeded", "failed", "unknown"):
        assert value(samples, steps, tool="shopify", outcome=outcome) == 1, outcome


async def test_a_streamed_reply_and_an_unreachable_model_are_counted(
    tmp_path: Path, receiver: Receiver, llm: FakeOpenAI
) -> None:
    made = await make_agent(tmp_path, receiver, llm_base_url=llm.url, llm_max_retries=1)
    assert made.runtime.llm is not None
    made.runtime.llm.backoff = 0.01
    llm.reply("It ships on Monday.")
    llm.reply("4")  # confidence 0.4: below the threshold, for an expert
    answer = await made.post("/v1/chat/stream", {"message": "When does it ship?"})
    assert '"flag_for_review":true' in answer.text and '"responder":"llm"' in answer.text
    llm.fail(500, times=2)
    body = (await made.post("/v1/chat", {"message": "When does it ship?"})).json()
    assert body["responder"] == "offline"
    samples = parse(_text(made.runtime.metrics))
    replies = "humanwork_agent_chat_replies_total"
    assert value(samples, replies, responder="llm", review="flagged") == 1
    assert value(samples, replies, responder="offline", review="flagged") == 1
    calls = "humanwork_agent_llm_calls_total"
    assert value(samples, calls, outcome="ok") == 2  # the stream and the rating
    assert value(samples, calls, outcome="unavailable") == 1  # 500, retried once, 500
    assert len(llm.requests) == 4
    await made.http.aclose()


def test_label_values_stay_bounded_whatever_a_task_or_a_model_names() -> None:
    metrics = AgentMetrics()
    metrics.executed("shopify_query", "succeeded")  # an alias: the catalog's name
    metrics.executed(None, "succeeded")  # an input step
    metrics.executed('evil"} 1\nhumanwork_x{a="', "failed")
    metrics.executed("amazon", "exploded")
    metrics.planned("a planner nobody knows")
    metrics.replied("gpt-99", True)
    metrics.llm_called("teapot", 0.01)
    metrics.reloaded("the org's wish")
    samples = parse(_text(metrics))
    steps = "humanwork_agent_step_executions_total"
    assert value(samples, steps, tool="shopify", outcome="succeeded") == 1
    assert value(samples, steps, tool="input", outcome="succeeded") == 1
    assert value(samples, steps, tool="other", outcome="failed") == 1
    assert value(samples, steps, tool="amazon", outcome="other") == 1
    assert value(samples, "humanwork_agent_plans_total", planner="other") == 1
    assert value(samples, "humanwork_agent_chat_replies_total", responder="other", review="flagged")
    assert value(samples, "humanwork_agent_llm_calls_total", outcome="other") == 1
    assert value(samples, "humanwork_agent_config_reloads_total", source="other") == 1
    labels = {v for (_, pairs) in samples for _, v in pairs}
    assert labels <= {
        "shopify",
        "amazon",
        "input",
        "other",
        "succeeded",
        "failed",
        "flagged",
        "delivered",
        "dropped",
    } | {b for (n, pairs) in samples for k, b in pairs if k == "le"}
    assert tool_label("web") == "web"


def test_the_agent_refuses_metrics_on_its_command_port(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="must differ"):
        agent_settings(tmp_path, "http://platform.test", agent_port=8080, agent_metrics_port=8080)
    on = agent_settings(tmp_path, "http://platform.test", agent_metrics_port=9100)
    assert isinstance(on, AgentSettings) and on.agent_metrics_port == 9100
    assert agent_settings(tmp_path, "http://platform.test").agent_metrics_port == 0


# --- the operator's half: the pod's port and the NetworkPolicy ------------------------------

SCRAPING = OperatorSettings(
    agent_metrics_port=9100,
    agent_metrics_namespaces="kubernetes.io/metadata.name=monitoring",
    agent_metrics_pods="app.kubernetes.io/name=prometheus",
)


def _container(settings: OperatorSettings) -> dict[str, Any]:
    pod = builders.pod_template(instance(), settings)
    container: dict[str, Any] = pod["spec"]["containers"][0]
    return container


def test_the_pod_declares_the_metrics_port_and_gives_it_to_the_agent() -> None:
    container = _container(SCRAPING)
    assert container["ports"] == [
        {"name": "http", "containerPort": 8080, "protocol": "TCP"},
        {"name": "metrics", "containerPort": 9100, "protocol": "TCP"},
    ]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["HUMANWORK_AGENT_METRICS_PORT"] == "9100"
    # off by default: no port, no variable
    default = _container(OperatorSettings())
    assert [p["name"] for p in default["ports"]] == ["http"]
    assert "HUMANWORK_AGENT_METRICS_PORT" not in {e["name"] for e in default["env"]}
    # the Service stays the command port's only
    service = builders.service(instance(), SCRAPING)
    assert [p["name"] for p in service["spec"]["ports"]] == ["http"]


def test_the_network_policy_opens_the_metrics_port_to_the_configured_scrapers_only() -> None:
    ingress = builders.network_policy(instance(), SCRAPING)["spec"]["ingress"]
    platform, scrapers = ingress
    assert platform["ports"] == [{"protocol": "TCP", "port": 8080}]  # not the metrics port
    assert scrapers == {
        "from": [
            {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
                "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
            }
        ],
        "ports": [{"protocol": "TCP", "port": 9100}],
    }
    # a port with no scrapers named: served, reachable by nobody (no rule at all, never an
    # empty selector, which would mean every namespace)
    closed = OperatorSettings(agent_metrics_port=9100)
    assert len(builders.network_policy(instance(), closed)["spec"]["ingress"]) == 1
    assert len(builders.network_policy(instance(), OperatorSettings())["spec"]["ingress"]) == 1
    any_pod = OperatorSettings(agent_metrics_port=9100, agent_metrics_namespaces="team=obs")
    (peer,) = builders.network_policy(instance(), any_pod)["spec"]["ingress"][1]["from"]
    assert peer == {"namespaceSelector": {"matchLabels": {"team": "obs"}}}


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"agent_metrics_port": 8080}, "must differ"),
        ({"agent_metrics_port": 70000}, "must be a port"),
        ({"agent_metrics_port": 9100, "agent_metrics_pods": "app=prometheus"}, "needs"),
        ({"agent_metrics_namespaces": "monitoring"}, "is not key=value"),
        ({"agent_metrics_namespaces": "a=b c"}, "is not a label value"),
        ({"agent_metrics_namespaces": "!a=b"}, "is not key=value"),
    ],
)
def test_the_operator_refuses_bad_metrics_settings(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        OperatorSettings(**settings)


def test_the_metrics_settings_come_from_the_operators_environment() -> None:
    settings = OperatorSettings.from_env(
        {
            "HUMANWORK_OPERATOR_AGENT_METRICS_PORT": "9100",
            "HUMANWORK_OPERATOR_AGENT_METRICS_NAMESPACES": "kubernetes.io/metadata.name=mon",
        }
    )
    assert settings.agent_metrics_port == 9100
    assert builders.network_policy(instance(), settings)["spec"]["ingress"][1]["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "mon"}}}
    ]
