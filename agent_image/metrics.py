"""Prometheus metrics of the agent, on a port of their own.

What a platform team watches on an agent: plans made by planner (`llm`, `offline`), chat
replies by responder and review (`auto`: may be sent as is, `flagged`: goes to an expert),
step executions by tool and outcome (`succeeded`, `failed`, `unknown`), the execution
loop's rounds and its errors by stage (`watch`, `task`), tool calls through the platform's
proxy by tool and outcome with a latency histogram by tool, model calls by outcome with a
latency histogram, configuration reloads by source, and, read when
Prometheus scrapes, the events delivered and dropped, the event outbox and the running
tasks. Every label value is bounded: tools are the catalog's (`input` for an input step,
`other` for anything else), outcomes and the like are enums (`other` when a value is not
one of them). No secret, no task content, no free text.

Each runtime has a registry of its own; `serve` exposes it on
`HUMANWORK_AGENT_METRICS_PORT` (0: off), never on the command port. The names follow the
operator's and the platform's (`humanwork_agent_*`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol

from prometheus_client import Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from humanwork_core import catalog
from humanwork_core.metrics import OwnRegistry

OTHER = "other"
"""The label value of anything outside a label's set."""
PLANNERS = frozenset({"llm", "offline"})
RESPONDERS = frozenset({"llm", "offline"})
STEP_OUTCOMES = frozenset({"succeeded", "failed", "unknown"})
LLM_OUTCOMES = frozenset({"ok", "refused", "unavailable", "malformed"})
RELOAD_SOURCES = frozenset({"configmap", "configure"})
LOOP_STAGES = frozenset({"watch", "task"})
"""Where the execution loop met an error: its watch of the tasks, or a task's worker."""
TOOL_OUTCOMES = frozenset({"ok", "refused", "upstream_error", "unavailable", "unknown", "busy"})
"""How a call through the tool proxy ended: a result; refused by the platform; the upstream
failed; the platform unreachable or busy after the retries; the outcome unknown; another
call of the same key holds its claim."""
INPUT_STEP = "input"
"""The `tool` label of an input step (it calls no tool)."""


def bounded(value: object, allowed: frozenset[str]) -> str:
    """`value` when it is one of `allowed`, else `other`."""
    return value if isinstance(value, str) and value in allowed else OTHER


def tool_label(tool: str | None) -> str:
    """The catalog's name of `tool`, `input` for none (an input step), else `other`."""
    if tool is None:
        return INPUT_STEP
    found = catalog.find_tool(tool)
    return found.name if found is not None else OTHER


class EventCounts(Protocol):
    """What the scrape reads of the event sender (`agent_image.events.EventSender`)."""

    @property
    def delivered(self) -> int: ...
    @property
    def dropped(self) -> int: ...
    @property
    def outbox_size(self) -> int: ...


class _Live(Collector):
    """Events and running tasks, read when Prometheus scrapes."""

    def __init__(self) -> None:
        self.events: EventCounts | None = None
        self.running: Callable[[], int] = lambda: 0

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        events = CounterMetricFamily(
            "humanwork_agent_events",
            "Events to the platform, by outcome (delivered, dropped: refused for good or "
            "pushed out of a full outbox).",
            labels=["outcome"],
        )
        outbox = GaugeMetricFamily(
            "humanwork_agent_event_outbox", "Undelivered events waiting to be retried."
        )
        running = GaugeMetricFamily(
            "humanwork_agent_running_tasks", "Tasks whose steps the agent is executing now."
        )
        if self.events is not None:
            events.add_metric(["delivered"], self.events.delivered)
            events.add_metric(["dropped"], self.events.dropped)
            outbox.add_metric([], self.events.outbox_size)
        running.add_metric([], self.running())
        yield events
        yield outbox
        yield running


class AgentMetrics(OwnRegistry):
    """One agent's metrics (see the module's description)."""

    def __init__(self) -> None:
        super().__init__()
        self.plans = Counter(
            "humanwork_agent_plans_total",
            "Plans made into AgenticTasks, by planner (llm, offline).",
            ["planner"],
            registry=self.registry,
        )
        self.replies = Counter(
            "humanwork_agent_chat_replies_total",
            "Chat replies drafted, by responder (llm, offline) and review (auto, flagged).",
            ["responder", "review"],
            registry=self.registry,
        )
        self.steps = Counter(
            "humanwork_agent_step_executions_total",
            "Approved steps executed, by tool and outcome (succeeded, failed, unknown).",
            ["tool", "outcome"],
            registry=self.registry,
        )
        self.llm_calls = Counter(
            "humanwork_agent_llm_calls_total",
            "Calls to the language model, by outcome (ok, refused, unavailable, malformed).",
            ["outcome"],
            registry=self.registry,
        )
        self.llm_latency = Histogram(
            "humanwork_agent_llm_call_duration_seconds",
            "Time one call to the language model took, its retries included.",
            buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120),
            registry=self.registry,
        )
        self._work_metrics()
        self.reloads = Counter(
            "humanwork_agent_config_reloads_total",
            "Configurations applied, by source (configmap, configure).",
            ["source"],
            registry=self.registry,
        )
        self.live = _Live()
        self.registry.register(self.live)

    def _work_metrics(self) -> None:
        """The execution loop's and the tool calls' series."""
        self.loop_rounds = Counter(
            "humanwork_agent_loop_iterations_total",
            "Rounds of the execution loop: each reads one task and runs its next approved "
            "step, if any.",
            registry=self.registry,
        )
        self.loop_errors = Counter(
            "humanwork_agent_loop_errors_total",
            "Errors the execution loop met and started again after, by stage (watch: the "
            "watch of the tasks; task: a task's worker).",
            ["stage"],
            registry=self.registry,
        )
        self.tool_calls = Counter(
            "humanwork_agent_tool_calls_total",
            "Calls through the platform's tool proxy (executions and reads while planning), "
            "by tool and outcome (ok, refused, upstream_error, unavailable, unknown, busy).",
            ["tool", "outcome"],
            registry=self.registry,
        )
        self.tool_latency = Histogram(
            "humanwork_agent_tool_call_duration_seconds",
            "Time one call through the platform's tool proxy took, its retries included.",
            ["tool"],
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
            registry=self.registry,
        )

    # --- what the agent's parts report ------------------------------------------------------

    def planned(self, planner: str) -> None:
        self.plans.labels(bounded(planner, PLANNERS)).inc()

    def replied(self, responder: str, flagged: bool) -> None:
        review = "flagged" if flagged else "auto"
        self.replies.labels(bounded(responder, RESPONDERS), review).inc()

    def executed(self, tool: str | None, outcome: str) -> None:
        self.steps.labels(tool_label(tool), bounded(outcome, STEP_OUTCOMES)).inc()

    def llm_called(self, outcome: str, seconds: float) -> None:
        self.llm_calls.labels(bounded(outcome, LLM_OUTCOMES)).inc()
        self.llm_latency.observe(max(seconds, 0.0))

    def looped(self, error: str | None) -> None:
        """One round of the execution loop (None), or the stage where it met an error."""
        if error is None:
            self.loop_rounds.inc()
        else:
            self.loop_errors.labels(bounded(error, LOOP_STAGES)).inc()

    def tool_called(self, tool: str, outcome: str, seconds: float) -> None:
        label = tool_label(tool)
        self.tool_calls.labels(label, bounded(outcome, TOOL_OUTCOMES)).inc()
        self.tool_latency.labels(label).observe(max(seconds, 0.0))

    def reloaded(self, source: str) -> None:
        self.reloads.labels(bounded(source, RELOAD_SOURCES)).inc()
