"""The agent's effective configuration (from its ConfigMap, hot-reloaded) and the
gate that decides whether a language model is used at all."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agent_image.dispatch import (
    enabled_tools,
)
from agent_image.llm import Completion, LLMClient

LOG = logging.getLogger("humanwork.agent.planner")

OFFLINE_MODEL = "offline"
"""The `model` reported for answers of the offline planner and responder."""

CORRECTION_MATCH = 0.5
"""How close (word overlap) a correction must be for the offline responder to reuse it."""

MAX_DESCRIPTION = 4096


# --- the effective configuration -------------------------------------------------------------


@dataclass(frozen=True)
class AgentConfig:
    """A typed view of the agent's effective configuration (`config.json` from the
    ConfigMap, with the platform's `POST /v1/configure` overlay on top). Accepts the
    operator's camelCase keys and the seed's snake_case ones."""

    data: Mapping[str, Any]
    config_hash: str = ""
    default_mode_env: str | None = None

    def _get(self, *names: str, within: Mapping[str, Any] | None = None) -> Any:
        source = self.data if within is None else within
        for name in names:
            if name in source and source[name] is not None:
                return source[name]
        return None

    @property
    def specialist(self) -> Mapping[str, Any]:
        value = self._get("specialist")
        return value if isinstance(value, Mapping) else {}

    @property
    def specialist_name(self) -> str:
        return str(self._get("name", within=self.specialist) or "the assistant")

    @property
    def system_prompt(self) -> str:
        prompt = self._get("systemPrompt", "system_prompt", within=self.specialist)
        return str(prompt or f"You are {self.specialist_name}, an operations specialist.")

    @property
    def model(self) -> str:
        return str(self._get("model") or "")

    @property
    def temperature(self) -> float | None:
        value = self._get("temperature")
        return float(value) if isinstance(value, int | float) else None

    @property
    def confidence_threshold(self) -> float:
        """0 to 1 (the configuration says 0 to 100; a value of at most 1 is a fraction)."""
        value = self._get("confidenceThreshold", "confidence_threshold")
        if not isinstance(value, int | float):
            return 0.7
        return float(value) if value <= 1 else float(value) / 100

    @property
    def enabled_tools(self) -> tuple[str, ...]:
        value = self._get("enabledTools", "enabled_tools")
        return tuple(str(v) for v in value) if isinstance(value, list | tuple) else ()

    @property
    def tools(self) -> tuple[str, ...]:
        """The proxy's names of the enabled tools (every known one when none is listed)."""
        return enabled_tools(self.enabled_tools)

    @property
    def max_concurrent_tasks(self) -> int:
        value = self._get("maxConcurrentTasks", "max_concurrent_tasks")
        return int(value) if isinstance(value, int) and value > 0 else 3

    @property
    def planning_lookups(self) -> bool:
        """Whether the planner may make read-only tool calls while planning."""
        return self._get("planningLookups", "planning_lookups") is True

    @property
    def default_mode(self) -> str | None:
        value = self._get("defaultMode", "default_mode")
        return str(value) if value else self.default_mode_env


class LLMGate:
    """Whether to try the language model: there is one, and it did not just fail.

    After a failure the agent works offline for `cooldown` seconds instead of making
    every request wait for retries against a dead endpoint."""

    def __init__(self, llm: LLMClient | None, cooldown: float = 30.0) -> None:
        self.llm = llm
        self.cooldown = cooldown
        self._down_until = 0.0
        self.last_error: str | None = None

    def usable(self) -> LLMClient | None:
        if self.llm is None or time.monotonic() < self._down_until:
            return None
        return self.llm

    def failed(self, error: Exception) -> None:
        self.last_error = str(error)
        self._down_until = time.monotonic() + self.cooldown
        LOG.warning("language model unavailable, offline for %.0fs: %s", self.cooldown, error)

    def succeeded(self) -> None:
        self.last_error = None


AuditHook = Callable[[Completion, str], Awaitable[None]]
"""Called after every model call with the completion and its purpose (plan, chat, ...)."""


async def no_audit(_: Completion, __: str) -> None:
    return None
