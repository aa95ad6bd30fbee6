"""The agent's effective configuration (from its ConfigMap, hot-reloaded) and the
gate that decides whether a language model is used at all."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agent_image.completions import ChatModel, Completion
from agent_image.dispatch import (
    enabled_tools,
)
from humanwork_core.runtime_config import AgentRuntimeConfig

LOG = logging.getLogger("humanwork.agent.planner")

OFFLINE_MODEL = "offline"
"""The `model` reported for answers of the offline planner and responder."""

CORRECTION_MATCH = 0.5
"""How close (word overlap) a correction must be for the offline responder to reuse it."""

MAX_DESCRIPTION = 4096


# --- the effective configuration -------------------------------------------------------------


@dataclass(frozen=True)
class AgentConfig:
    """The agent's effective configuration: `config.json` from the ConfigMap with the
    platform's `POST /v1/configure` overlay on top, parsed with the model the operator
    writes it with (`humanwork_core.runtime_config`), its hash, and the environment's
    default mode. Raises pydantic's ValidationError for data that is not a configuration."""

    data: Mapping[str, Any]
    config_hash: str = ""
    default_mode_env: str | None = None
    runtime: AgentRuntimeConfig = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "runtime", AgentRuntimeConfig.model_validate(dict(self.data)))

    @property
    def specialist_name(self) -> str:
        return self.runtime.specialist.name

    @property
    def system_prompt(self) -> str:
        prompt = self.runtime.specialist.system_prompt
        return prompt or f"You are {self.specialist_name}, an operations specialist."

    @property
    def model(self) -> str:
        return self.runtime.model

    @property
    def temperature(self) -> float | None:
        return self.runtime.temperature

    @property
    def confidence_threshold(self) -> float:
        """0 to 1 (the configuration says percent)."""
        return self.runtime.threshold_fraction

    @property
    def enabled_tools(self) -> tuple[str, ...]:
        return self.runtime.enabled_tools

    @property
    def tools(self) -> tuple[str, ...]:
        """The proxy's names of the enabled tools (every known one when none is listed)."""
        return enabled_tools(self.enabled_tools)

    @property
    def max_concurrent_tasks(self) -> int:
        return self.runtime.max_concurrent_tasks

    @property
    def planning_lookups(self) -> bool:
        """Whether the planner may make read-only tool calls while planning."""
        return self.runtime.planning_lookups

    @property
    def default_mode(self) -> str | None:
        return self.runtime.default_mode or self.default_mode_env


class LLMGate:
    """Whether to try the language model: there is one, and it did not just fail.

    After a failure the agent works offline for `cooldown` seconds instead of making
    every request wait for retries against a dead endpoint."""

    def __init__(self, llm: ChatModel | None, cooldown: float = 30.0) -> None:
        self.llm = llm
        self.cooldown = cooldown
        self._down_until = 0.0
        self.last_error: str | None = None

    def usable(self) -> ChatModel | None:
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
