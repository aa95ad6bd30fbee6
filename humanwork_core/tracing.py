"""OpenTelemetry tracing for the three components, on the standard `OTEL_*` variables.

Off unless the environment names an OTLP endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT` or
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) and neither `OTEL_SDK_DISABLED=true` nor
`OTEL_TRACES_EXPORTER=none` says otherwise. Off means off: :func:`setup` imports no SDK and
starts no exporter, and :func:`span` is a context manager that yields None and touches
nothing. On, :func:`setup` installs a TracerProvider with a batching OTLP/HTTP exporter; the
SDK reads the rest of `OTEL_*` itself (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`,
`OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_BSP_*`, sampling, ...).

The context crosses components as a W3C `traceparent`: an HTTP header
(:func:`headers`, :func:`context_from_headers`) on the platform's signed commands, the
agent's calls to the platform (tool proxy, signed events), and the AgenticTask's annotation
:data:`TRACEPARENT_ANNOTATION`, which the platform writes when it binds the requester and
the operator and the agent read (:func:`context_from_annotations`).

What a span may hold: identifiers (org, agent, task, step, tool, action, user id), verdicts,
phases and HTTP status codes; never a token, secret, credential, parameter value, message
text or result (:func:`span` drops any attribute whose name is not on the allow list
:data:`ALLOWED_ATTRIBUTES`, whatever a caller passes).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

from humanwork_core.resources import AgenticTask

TRACEPARENT_ANNOTATION = "humanwork.io/traceparent"
"""The W3C traceparent of the plan request that made an AgenticTask (written by the platform)."""
TRACEPARENT_HEADER = "traceparent"
_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")

ALLOWED_ATTRIBUTES = frozenset(
    {
        "gen_ai.operation.name",
        "gen_ai.agent.name",
        "gen_ai.request.model",
        "gen_ai.tool.name",
        "gen_ai.tool.call.id",
        "gen_ai.tool.type",
        "http.request.method",
        "http.response.status_code",
        "server.address",
        "server.port",
        "error.type",
        "humanwork.org.id",
        "humanwork.agent",
        "humanwork.namespace",
        "humanwork.task",
        "humanwork.step.id",
        "humanwork.step.risk",
        "humanwork.step.attempt",
        "humanwork.tool.action",
        "humanwork.tool.integration",
        "humanwork.decision.verdict",
        "humanwork.decision.by",
        "humanwork.task.phase",
        "humanwork.event.type",
        "humanwork.plan_request.id",
        "humanwork.outcome",
    }
)
"""The only attribute names a span carries: identifiers and outcomes, never values."""

LOG = logging.getLogger(__name__)
_state: dict[str, Any] = {"tracer": None, "provider": None}


def configured(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the `OTEL_*` variables ask for traces to be exported."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if env.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() in ("none", ""):
        return False
    return bool(
        env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    )


def enabled() -> bool:
    """Whether :func:`setup` started tracing in this process."""
    return _state["tracer"] is not None


def setup(default_service: str) -> bool:
    """Start tracing when the environment asks for it (see the module's doc); the service
    name is `OTEL_SERVICE_NAME`, else `default_service`. Idempotent; returns whether on."""
    if enabled():
        return True
    if not configured():
        return False
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import OTELResourceDetector, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    service = os.environ.get("OTEL_SERVICE_NAME") or default_service
    resource = Resource.create({"service.name": service}).merge(OTELResourceDetector().detect())
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    _state.update(provider=provider, tracer=provider.get_tracer("humanwork"))
    LOG.info("tracing on: service %s", service)
    return True


def shutdown() -> None:
    """Flush and stop the exporter (a no-op when tracing is off)."""
    provider = _state["provider"]
    if provider is not None:
        provider.shutdown()
        _state.update(provider=None, tracer=None)


def _clean(attributes: Mapping[str, Any]) -> dict[str, Any]:
    return {
        k: v
        for k, v in attributes.items()
        if k in ALLOWED_ATTRIBUTES and isinstance(v, str | int | float | bool) and v is not None
    }


@contextlib.contextmanager
def span(
    name: str,
    attributes: Mapping[str, Any] | None = None,
    *,
    parent: Any = None,
    kind: str = "internal",
    start: datetime | None = None,
) -> Iterator[Any]:
    """A span named `name` around the block, the current one while it runs, a child of
    `parent` (a context from :func:`context_from_headers` / :func:`context_from_annotations`)
    or of the current span; `start` backdates it (a wait that began earlier). Yields the
    span, or None when tracing is off. An exception ends it with an error status."""
    tracer = _state["tracer"]
    if tracer is None:
        yield None
        return
    from opentelemetry.trace import SpanKind, Status, StatusCode

    kinds = {"server": SpanKind.SERVER, "client": SpanKind.CLIENT}
    started = int(start.timestamp() * 1e9) if start is not None else None
    # an exception's message may quote a value: the span keeps its type only
    with tracer.start_as_current_span(
        name,
        context=parent,
        kind=kinds.get(kind, SpanKind.INTERNAL),
        attributes=_clean(attributes or {}),
        start_time=started,
        record_exception=False,
        set_status_on_exception=False,
    ) as current:
        try:
            yield current
        except BaseException as exc:
            if not current.attributes.get("error.type"):
                current.set_attribute("error.type", type(exc).__name__)
            current.set_status(Status(StatusCode.ERROR))
            raise


def execute_tool(
    task: AgenticTask, step_id: str, tool: str | None, call_id: str
) -> contextlib.AbstractContextManager[Any]:
    """The GenAI span `execute_tool <tool>` of one step of `task` (`gen_ai.tool.name`,
    `gen_ai.tool.call.id`), in the task's trace (its annotation)."""
    meta = task.metadata
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool or "input",
        "gen_ai.tool.call.id": call_id,
        "humanwork.task": f"{meta.namespace}/{meta.name}",
        "humanwork.step.id": step_id,
    }
    parent = context_from_annotations(meta.annotations)
    return span(f"execute_tool {tool or 'input'}", attributes, parent=parent)


def annotate(current: Any, attributes: Mapping[str, Any]) -> None:
    """Add allowed attributes to a span from :func:`span` (None: tracing off, nothing)."""
    if current is not None:
        current.set_attributes(_clean(attributes))


def traceparent() -> str | None:
    """The current span's W3C traceparent, or None (tracing off or no span)."""
    return headers().get(TRACEPARENT_HEADER)


def headers() -> dict[str, str]:
    """The headers that carry the current span to another component ({} when off)."""
    if not enabled():
        return {}
    from opentelemetry.propagate import inject

    carrier: dict[str, str] = {}
    inject(carrier)
    return carrier


def context_from_headers(values: Mapping[str, str]) -> Any:
    """The context an incoming request carries (None when off or it carries none)."""
    value = next((v for k, v in values.items() if k.lower() == TRACEPARENT_HEADER), None)
    return _context(value)


def context_from_annotations(annotations: Mapping[str, str] | None) -> Any:
    """The context of the plan request that made a task (its annotation), or None."""
    return _context((annotations or {}).get(TRACEPARENT_ANNOTATION))


def _context(value: str | None) -> Any:
    if not enabled() or not value or not _TRACEPARENT.match(value.strip()):
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator().extract({TRACEPARENT_HEADER: value.strip()})


def current_trace_id() -> str | None:
    """The current span's trace id (32 hex digits), or None when off or none is current."""
    if not enabled():
        return None
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None
