"""The agent's runtime: everything it works with, built once per process from the settings.

:class:`Runtime` holds the configuration, the HTTP, Kubernetes, platform and model clients,
the planner, the responder, the corrections store and the cancelled tasks; the routes
(`agent_image.routes`) find it on the app's state and the background jobs are given it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from agent_image.commands import CommandVerifier, ConfigOverlay, kube_error
from agent_image.config import ConfigHolder
from agent_image.corrections import CorrectionStore
from agent_image.events import EventSender
from agent_image.kube import KubeClient, KubeError
from agent_image.llm import LLMClient, llm_configured
from agent_image.metrics import AgentMetrics
from agent_image.observed import Observed
from agent_image.planning.config import AgentConfig, LLMGate
from agent_image.planning.llm import Planner
from agent_image.platform import PlatformClient
from agent_image.responder import Responder
from agent_image.settings import AgentSettings
from agent_image.tls import platform_client

LOG = logging.getLogger("humanwork.agent")


class CancelRegistry:
    """Tasks the platform cancelled, kept in `<state dir>/cancelled.json` so that a
    restarted agent does not resume them."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / "cancelled.json"
        try:
            self.entries: dict[str, dict[str, Any]] = dict(json.loads(self.path.read_text()))
        except (OSError, ValueError, TypeError):
            self.entries = {}

    def __contains__(self, name: object) -> bool:
        return name in self.entries

    def add(self, name: str, **info: Any) -> None:
        self.entries[name] = {"at": datetime.now(UTC).isoformat(), **info}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.entries, indent=1))
            tmp.replace(self.path)
        except OSError as exc:
            LOG.error("cannot persist the cancellation of %s: %s", name, exc)


@dataclass
class Runtime:
    """Everything the agent works with; one per process, built from the settings only."""

    settings: AgentSettings
    holder: ConfigHolder
    overlay: ConfigOverlay
    http: httpx.AsyncClient
    kube: KubeClient
    events: EventSender
    platform: PlatformClient
    llm: LLMClient | None
    gate: LLMGate
    planner: Planner
    responder: Responder
    corrections: CorrectionStore
    cancelled: CancelRegistry
    verifier: CommandVerifier
    observed: Observed
    started: float = field(default_factory=time.monotonic)
    metrics: AgentMetrics = field(default_factory=AgentMetrics)
    """The agent's Prometheus metrics (served on `agent_metrics_port`; see agent_image.metrics)."""
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Tasks being worked on (the executor tracks them): name -> what /v1/status shows."""
    on_cancel: list[Callable[[str], Awaitable[None]]] = field(default_factory=list)
    """Called with a task's name when the platform cancels it (the executor stops it)."""

    # --- configuration ---------------------------------------------------------------------

    def config(self) -> AgentConfig:
        """The effective configuration: the ConfigMap's file with the pushed overlay."""
        data, digest = self.overlay.effective(self.holder.current)
        return AgentConfig(data, digest, self.settings.default_mode or None)

    # --- task bookkeeping (for the executor) -----------------------------------------------

    def track_task(self, name: str, **info: Any) -> None:
        """Record (or update) what the agent is doing with task `name`."""
        entry = self.tasks.setdefault(name, {"since": datetime.now(UTC).isoformat()})
        entry.update(info)

    def untrack_task(self, name: str) -> None:
        self.tasks.pop(name, None)

    def is_cancelled(self, name: str) -> bool:
        """Whether the platform cancelled task `name` (the executor runs none of its steps)."""
        return name in self.cancelled

    def state_dir(self) -> Path:
        self.settings.state_dir.mkdir(parents=True, exist_ok=True)
        return self.settings.state_dir

    async def announce_config(self, source: str, **details: Any) -> AgentConfig:
        """Tell the platform the effective configuration (`config.applied`, with its hash,
        the ConfigMap's hash, where the change came from and the model); returns it."""
        config = self.config()
        self.metrics.reloaded(source)
        await self.events.emit(
            "config.applied",
            payload={
                "configHash": config.config_hash,
                "configMapHash": self.holder.current.config_hash,
                "source": source,
                **details,
                "model": config.model,
            },
        )
        return config

    # --- the model and tool calls of planning and chat (see agent_image.observed) --------

    async def read_tool(
        self, tool: str, action: str, params: dict[str, Any], purpose: str = "plan"
    ) -> dict[str, Any]:
        return await self.observed.read_tool(tool, action, params, purpose)

    # --- planning --------------------------------------------------------------------------

    def task_name(self, idempotency_key: str | None) -> str:
        """`<agent>-<10 hex>`: derived from the idempotency key when there is one, so a
        retried request names the same task."""
        if idempotency_key:
            seed = f"{self.settings.agent_id}\0{idempotency_key}".encode()
            suffix = hashlib.sha256(seed).hexdigest()[:10]
        else:
            suffix = uuid.uuid4().hex[:10]
        return f"{self.settings.agent_name}-{suffix}"

    async def own_task(self, name: str) -> dict[str, Any] | None:
        try:
            task = await self.kube.get_task(name)
        except KubeError as exc:
            raise kube_error(exc) from None
        if task is None:
            return None
        ref = ((task.get("spec") or {}).get("agentRef") or {}).get("name")
        return task if ref == self.settings.agent_name else None


def build_runtime(
    settings: AgentSettings,
    *,
    http: httpx.AsyncClient | None = None,
    kube: KubeClient | None = None,
    llm: LLMClient | None = None,
) -> Runtime:
    """The runtime of the settings; reads only the configuration file (which must exist)
    and the state folder; secrets and tokens are read when used."""
    holder = ConfigHolder(settings.config_file)
    client = http or platform_client(settings.platform_ca_file)
    metrics = AgentMetrics()
    if llm is None and llm_configured(settings.llm_base_url):
        key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
        llm = LLMClient(
            settings.llm_base_url,
            key,
            timeout=settings.llm_timeout_seconds,
            max_retries=settings.llm_max_retries,
        )
    if llm is not None and llm.observe is None:
        llm.observe = metrics.llm_called
    gate = LLMGate(llm)
    events = EventSender(settings, client)
    corrections = CorrectionStore(settings.state_dir)
    overlay = ConfigOverlay()
    platform = PlatformClient(settings, client)

    def config_hash() -> str:
        return overlay.effective(holder.current)[1]

    observed = Observed(events, platform, config_hash)
    runtime = Runtime(
        settings=settings,
        holder=holder,
        overlay=overlay,
        http=client,
        kube=kube or KubeClient.from_settings(settings),
        events=events,
        platform=platform,
        llm=llm,
        gate=gate,
        planner=Planner(gate, observed.audit_llm, observed.read_tool),
        responder=Responder(gate, corrections, observed.audit_llm, observed.run_tool),
        corrections=corrections,
        cancelled=CancelRegistry(settings.state_dir),
        verifier=CommandVerifier(settings),
        observed=observed,
        metrics=metrics,
    )
    runtime.platform.observe_tool = metrics.tool_called
    metrics.live.events = events
    metrics.live.running = lambda: len(runtime.tasks)
    return runtime
