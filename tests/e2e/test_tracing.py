"""One approval is one trace across the platform, the agent and the operator.

A real OpenTelemetry Collector (built from the Go module proxy by `make otelcol-binaries`:
the OTLP/HTTP receiver and the file exporter) listens on loopback; the platform, the
operator and the agent are restarted with the standard `OTEL_*` variables pointing at it,
one plan is requested, its first step approved and executed, and the collector's file must
hold one trace in which every component's spans hang in the right parent order, and none
of the secrets, tokens, credentials or parameter values the run used.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from humanwork_dev.fakes.catalog import SEED_REQUEST
from humanwork_dev.processes import OperatorProcess, PlatformProcess, free_port
from tests.e2e.conftest import World, execution_state
from tests.fixtures.stack import PROCESS_START_SECONDS
from tests.platform.conftest import ADMIN_PASSWORD, CREDENTIALS_KEY, JWT_SECRET

REPO = Path(__file__).resolve().parents[2]
WITHIN = 120.0
"""How long the spans may take to reach the file (batched every 200 ms; a loaded machine)."""


def _binary() -> Path:
    out = subprocess.run(
        [str(REPO / "humanwork_dev/scripts/build-otelcol.sh"), "--print-bin"],
        capture_output=True,
        text=True,
        check=True,
    )
    path = Path(out.stdout.strip()) / "otelcol"
    assert path.exists(), f"{path} is missing: run `make otelcol-binaries`"
    return path


@dataclass
class Span:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    start: int
    end: int
    attributes: dict[str, Any]


@dataclass
class Collector:
    """The collector process, the file its exporter writes and the variables to reach it."""

    proc: subprocess.Popen[bytes]
    file: Path
    port: int

    @property
    def env(self) -> dict[str, str]:
        return {
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{self.port}",
            "OTEL_BSP_SCHEDULE_DELAY": "200",
        }

    def spans(self) -> list[Span]:
        """The spans of every whole line of the file: the exporter may be writing the last
        one (a line is whole once its newline is written)."""
        if not self.file.exists():
            return []
        found = []
        text = self.file.read_text()
        for line in text[: text.rfind("\n") + 1].splitlines():
            for rs in json.loads(line).get("resourceSpans", []) if line.strip() else []:
                found.extend(_spans(rs))
        return found

    async def until(self, check: Callable[[list[Span]], bool]) -> list[Span]:
        deadline = time.monotonic() + WITHIN
        while True:
            spans = self.spans()
            if check(spans):
                return spans
            assert time.monotonic() < deadline, sorted({(s.service, s.name) for s in spans})
            await asyncio.sleep(0.2)


def _value(raw: dict[str, Any]) -> Any:
    return next(iter(raw.values())) if raw else None


def _spans(resource_spans: dict[str, Any]) -> Iterator[Span]:
    resource = {a["key"]: _value(a["value"]) for a in resource_spans["resource"]["attributes"]}
    for scope in resource_spans.get("scopeSpans", []):
        for s in scope.get("spans", []):
            yield Span(
                service=str(resource.get("service.name")),
                name=s["name"],
                trace_id=s["traceId"],
                span_id=s["spanId"],
                parent_id=s.get("parentSpanId", ""),
                start=int(s["startTimeUnixNano"]),
                end=int(s["endTimeUnixNano"]),
                attributes={a["key"]: _value(a["value"]) for a in s.get("attributes", [])},
            )


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[Collector]:
    port = free_port()
    out = tmp_path / "traces.jsonl"
    config = tmp_path / "otelcol.yaml"
    config.write_text(
        json.dumps(
            {
                "receivers": {"otlp": {"protocols": {"http": {"endpoint": f"127.0.0.1:{port}"}}}},
                "exporters": {"file": {"path": str(out), "flush_interval": "100ms"}},
                "service": {
                    "telemetry": {"metrics": {"level": "none"}},
                    "pipelines": {"traces": {"receivers": ["otlp"], "exporters": ["file"]}},
                },
            }
        )
    )
    log = (tmp_path / "otelcol.log").open("ab")
    proc = subprocess.Popen(
        [str(_binary()), f"--config=file:{config}"], stdout=log, stderr=subprocess.STDOUT
    )
    try:
        _wait_listening(proc, port, tmp_path / "otelcol.log")
        yield Collector(proc, out, port)
    finally:
        proc.terminate()
        proc.wait(20)


def _wait_listening(proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        try:
            # an empty export is answered 200 once the receiver is up
            r = httpx.post(
                f"http://127.0.0.1:{port}/v1/traces",
                content=b"{}",
                headers={"Content-Type": "application/json"},
                timeout=2,
            )
            if r.status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"the collector did not listen: {log.read_text()}")


def _restart_all(
    world: World, platform: PlatformProcess, operator: OperatorProcess, env: dict[str, str]
) -> None:
    platform.stop()
    platform.start(timeout=PROCESS_START_SECONDS, port=platform.port, env=env)
    operator.stop()
    operator.extra_env = {
        **{k: v for k, v in operator.extra_env.items() if not k.startswith("OTEL_")},
        **env,
    }
    operator.start()
    world.agent.stop()
    world.agent.spec.env.update(env)
    world.agent.start(timeout=PROCESS_START_SECONDS)


def _one(spans: list[Span], service: str, name: str, **attributes: Any) -> Span:
    found = [
        s
        for s in spans
        if s.service == service
        and s.name == name
        and all(s.attributes.get(k) == v for k, v in attributes.items())
    ]
    assert found, (service, name, attributes, sorted({(s.service, s.name) for s in spans}))
    return found[0]


async def test_one_approval_is_one_trace_across_every_component(
    world: World, operator: OperatorProcess, collector: Collector
) -> None:
    platform = world.platform
    _restart_all(world, platform, operator, collector.env)
    try:
        await _approve_and_check(world, collector)
        await _a_clients_message_starts_its_plans_trace(world, collector)
    finally:  # the shared processes go back to exporting nothing
        _restart_all(world, platform, operator, {})


WANTED = {
    ("humanwork-platform", "humanwork.plan_request"),
    ("humanwork-platform", "humanwork.approval"),
    ("humanwork-platform", "humanwork.wait_for_human"),
    ("humanwork-platform", "humanwork.tool_proxy"),
    ("humanwork-platform", "humanwork.upstream_call"),
    ("humanwork-platform", "humanwork.agent_event"),
    ("humanwork-agent", "invoke_agent"),
    ("humanwork-agent", "execute_tool amazon"),
    ("humanwork-operator", "humanwork.reconcile_task"),
}
"""Every span the check below names: a child is exported before its parent ends, so the
file holds the whole trace only once each of them is in it."""


def _complete(spans: list[Span]) -> bool:
    """Every wanted span is in, and every span of the plan's trace has its parent there
    (the batches of three processes arrive in any order); the trace's first span, the
    platform's request, has none."""
    if not {(s.service, s.name) for s in spans} >= WANTED:
        return False
    roots = [s for s in spans if s.name == "humanwork.plan_request"]
    trace = {s.span_id: s for s in spans if s.trace_id == roots[0].trace_id}
    return all(not s.parent_id or s.parent_id in trace for s in trace.values())


async def _approve_and_check(world: World, collector: Collector) -> None:
    r = await world.ask_platform()  # the requester asks, through the platform
    assert r.status_code in (200, 201), r.text
    planned = r.json()
    name, read = planned["id"].split("/")[1], planned["steps"][0]
    r = await world.decide(name, read["id"])
    assert r.status_code == 200, r.text
    await world.until(name, lambda t: execution_state(t, read["id"]) == "Succeeded")
    spans = await collector.until(_complete)

    root = _one(spans, "humanwork-platform", "humanwork.plan_request")
    assert root.attributes["humanwork.task"] == f"{world.namespace}/{name}"
    trace = [s for s in spans if s.trace_id == root.trace_id]
    by_id = {s.span_id: s for s in trace}

    def parent(span: Span) -> Span:
        return by_id[span.parent_id]

    planning = _one(trace, "humanwork-agent", "invoke_agent")
    assert parent(planning) is root
    approval = _one(trace, "humanwork-platform", "humanwork.approval")
    assert parent(approval) is root
    assert approval.attributes["humanwork.step.id"] == read["id"]
    assert approval.attributes["humanwork.decision.verdict"] == "approve"
    expert = "expert-" + world.namespace.removeprefix("org-")
    assert approval.attributes["humanwork.decision.by"] == expert
    wait = _one(trace, "humanwork-platform", "humanwork.wait_for_human")
    assert parent(wait) is approval and wait.start == approval.start
    reconcile = _one(trace, "humanwork-operator", "humanwork.reconcile_task")
    assert parent(reconcile) is root
    execute = _one(trace, "humanwork-agent", "execute_tool amazon")
    assert parent(execute) is root and execute.start >= approval.start
    assert execute.attributes["gen_ai.tool.name"] == "amazon"
    assert execute.attributes["gen_ai.tool.call.id"].endswith(f"/{read['id']}")
    proxy = _one(trace, "humanwork-platform", "humanwork.tool_proxy")
    assert parent(proxy) is execute
    assert proxy.attributes["gen_ai.tool.call.id"] == execute.attributes["gen_ai.tool.call.id"]
    upstream = _one(trace, "humanwork-platform", "humanwork.upstream_call")
    assert parent(upstream) is proxy
    events = [s for s in trace if s.name == "humanwork.agent_event"]
    assert any(parent(e) is execute for e in events), "the signed events carry the trace"
    _assert_no_secret(world, collector, read)


def _assert_no_secret(world: World, collector: Collector, step: dict[str, Any]) -> None:
    text = collector.file.read_text()
    secrets = [
        world.token,
        world.callback_secret,
        world.expert["Authorization"].removeprefix("Bearer "),
        ADMIN_PASSWORD,
        JWT_SECRET,
        CREDENTIALS_KEY,
        SEED_REQUEST,
        *[str(v) for v in world.shop.credentials().values()],
        *[str(v) for v in world.amazon.credentials().values()],
        *[str(v) for v in (step["parameters"].get("params") or {}).values()],
    ]
    leaked = [s for s in secrets if len(s) >= 6 and s in text]
    assert leaked == [], leaked


async def _a_clients_message_starts_its_plans_trace(world: World, collector: Collector) -> None:
    """A plan the dispatcher asks for (a client's message, nobody pressing a button) is
    traced from the message: the agent's planning and the operator's reconcile of the task
    it filed hang under the platform's `humanwork.client_message`."""
    _, password, client = await world.add_user("client-trace", "client")
    r = await world.http.post(
        f"{world.platform.url}/orgs/{world.org_id}/conversations",
        json={"subject": "October", "message": SEED_REQUEST},
        headers=client,
    )
    assert r.status_code == 201, r.text
    task = f"{world.namespace}/{await _planned_task(world, client, str(r.json()['id']))}"

    def traced(spans: list[Span]) -> bool:
        roots = [s for s in spans if s.name == "humanwork.client_message"]
        ours = [s for s in roots if s.attributes.get("humanwork.task") == task]
        names = {s.name for s in spans if ours and s.trace_id == ours[0].trace_id}
        return {"invoke_agent", "humanwork.reconcile_task"} <= names

    spans = await collector.until(traced)
    root = _one(spans, "humanwork-platform", "humanwork.client_message", **{"humanwork.task": task})
    trace = {s.span_id: s for s in spans if s.trace_id == root.trace_id}
    planning = _one(list(trace.values()), "humanwork-agent", "invoke_agent")
    assert trace[planning.parent_id] is root
    reconcile = _one(list(trace.values()), "humanwork-operator", "humanwork.reconcile_task")
    assert trace[reconcile.parent_id] is root
    assert password not in collector.file.read_text()


async def _planned_task(world: World, client: dict[str, str], cid: str) -> str:
    """The task the message's plan filed, once the client's thread says it waits."""
    deadline = time.monotonic() + WITHIN
    while True:
        r = await world.http.get(
            f"{world.platform.url}/orgs/{world.org_id}/conversations/{cid}", headers=client
        )
        assert r.status_code == 200, r.text
        for message in r.json()["messages"]:
            meta = message.get("meta") or {}
            if meta.get("event") == "plan_waiting":
                return str(meta["task"])
        assert time.monotonic() < deadline, (r.json()["messages"], world.agent.tail(40))
        await asyncio.sleep(0.2)
