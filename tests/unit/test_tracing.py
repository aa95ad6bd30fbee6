"""humanwork_core.tracing: off (no SDK, nothing exported) unless `OTEL_*` asks; on, a span
carries only the allowed attributes; the JSON log lines carry the trace id."""

from __future__ import annotations

import http.server
import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import ClassVar

import pytest

from humanwork_core import logs, tracing

PROBE = """
import json, sys
from humanwork_core import tracing
on = tracing.setup("probe")
with tracing.span("x", {"humanwork.step.id": "s1"}) as s:
    headers = tracing.headers()
print(json.dumps({
    "on": on,
    "span": s is not None,
    "headers": headers,
    "sdk": sorted(m for m in sys.modules if m.startswith("opentelemetry.sdk")),
    "exporter": any(m.startswith("opentelemetry.exporter") for m in sys.modules),
}))
"""


def _probe(**env: str) -> dict[str, object]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    result: dict[str, object] = json.loads(out.stdout.splitlines()[-1])
    return result


class _Receiver(http.server.BaseHTTPRequestHandler):
    """An OTLP/HTTP endpoint on loopback that only counts what it is sent."""

    received: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).received.append(self.path)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[str]]]:
    _Receiver.received = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", _Receiver.received
    finally:
        server.shutdown()


def test_without_otel_variables_no_sdk_is_set_up_and_nothing_is_exported(
    receiver: tuple[str, list[str]],
) -> None:
    endpoint, received = receiver
    off = _probe()
    assert off == {"on": False, "span": False, "headers": {}, "sdk": [], "exporter": False}
    # switched off explicitly, an endpoint does not turn it on, and nothing is sent to it
    for switch in ({"OTEL_SDK_DISABLED": "true"}, {"OTEL_TRACES_EXPORTER": "none"}):
        assert _probe(OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, **switch) == off
    assert received == []
    # the positive control: an endpoint turns it on, the span travels as a traceparent and
    # is exported (at the latest when the process exits)
    on = _probe(OTEL_EXPORTER_OTLP_ENDPOINT=endpoint)
    assert on["on"] is True and on["span"] is True and on["exporter"] is True
    assert str(on["headers"]["traceparent"]).startswith("00-")  # type: ignore[index]
    assert received == ["/v1/traces"]


@pytest.fixture
def recorded() -> Iterator[object]:
    """Tracing on in this process, into memory (the SDK's own exporter for tests)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracing._state.update(provider=provider, tracer=provider.get_tracer("test"))
    try:
        yield memory
    finally:
        tracing._state.update(provider=None, tracer=None)


def test_a_span_keeps_only_allowed_attributes(recorded: object) -> None:
    with tracing.span(
        "execute_tool shopify",
        {
            "gen_ai.tool.name": "shopify",
            "humanwork.step.id": "s2",
            "params": "available_adjustment=-3",
            "humanwork.token": "eyJhbGciOi",
            "http.request.header.authorization": "Bearer x",
        },
    ) as current:
        tracing.annotate(current, {"humanwork.outcome": "ok", "result": "secret order 42"})
    (span,) = recorded.get_finished_spans()  # type: ignore[attr-defined]
    assert dict(span.attributes) == {
        "gen_ai.tool.name": "shopify",
        "humanwork.step.id": "s2",
        "humanwork.outcome": "ok",
    }


def test_a_context_crosses_as_a_traceparent_and_an_annotation(recorded: object) -> None:
    with tracing.span("humanwork.plan_request"):
        traceparent = tracing.traceparent()
    assert traceparent is not None
    parent = tracing.context_from_annotations({tracing.TRACEPARENT_ANNOTATION: traceparent})
    with tracing.span("humanwork.reconcile_task", parent=parent):
        pass
    with tracing.span(
        "invoke_agent", parent=tracing.context_from_headers({"Traceparent": traceparent})
    ):
        pass
    # a malformed value is no context (a new trace), never an error
    assert tracing.context_from_annotations({tracing.TRACEPARENT_ANNOTATION: "x"}) is None
    root, child, other = recorded.get_finished_spans()  # type: ignore[attr-defined]
    assert child.parent.span_id == root.context.span_id == other.parent.span_id
    assert child.context.trace_id == root.context.trace_id


def test_json_logs_carry_the_trace_id_when_a_span_is_current(recorded: object) -> None:
    formatter = logs.JsonFormatter()
    record = logging.LogRecord("humanwork", logging.INFO, __file__, 1, "hello %s", ("x",), None)
    assert "trace_id" not in json.loads(formatter.format(record))
    with tracing.span("humanwork.plan_request") as current:
        line = json.loads(formatter.format(record))
    assert line["message"] == "hello x" and line["level"] == "INFO"
    assert line["trace_id"] == format(current.get_span_context().trace_id, "032x")
