"""The agent's runtime configuration: what the operator writes into the agent's ConfigMap
(`config.json`) and what the agent reads back, as one typed model.

The operator builds it from the AgentInstance (:meth:`AgentRuntimeConfig.of_instance`)
and hashes its canonical JSON (the AgentInstance's `status.configHash`); the agent parses
the file (and the platform's `POST /v1/configure` overlay on top) with the same model, so
both sides agree on every key, its unit and its default. Keys are camelCase on the wire;
the seeds' snake_case spellings are accepted on input. Unknown keys are ignored, so an
agent keeps working with a newer operator's file.

Pure data, no I/O.
"""

from __future__ import annotations

import json
from typing import Any, Literal, Self

from pydantic import ConfigDict, Field

from .resources import AgentInstanceSpec
from .resources.common import ResourceModel

DEFAULT_CONFIDENCE_THRESHOLD = 70
"""Percent, as in `AgentInstance.spec.confidenceThreshold`."""


class RuntimeSpecialist(ResourceModel):
    """The persona the agent plays."""

    model_config = ConfigDict(extra="ignore")

    name: str = "the assistant"
    system_prompt: str | None = None


class AgentRuntimeConfig(ResourceModel):
    """The configuration an agent hot-reloads: persona, model, thresholds and tools."""

    model_config = ConfigDict(extra="ignore")

    specialist: RuntimeSpecialist = Field(default_factory=RuntimeSpecialist)
    model: str = ""
    temperature: float | None = Field(default=None, ge=0, le=2)
    confidence_threshold: int | float = Field(default=DEFAULT_CONFIDENCE_THRESHOLD, ge=0, le=100)
    """Percent; a value of at most 1 is read as a fraction (the seeds wrote 0.7)."""
    enabled_tools: tuple[str, ...] = ()
    max_concurrent_tasks: int = Field(default=3, ge=1, le=100)
    default_mode: Literal["domain", "agentic"] | None = None
    planning_lookups: bool = False
    """Whether the planner may make read-only tool calls while planning."""

    @classmethod
    def of_instance(cls, spec: AgentInstanceSpec) -> Self:
        """What the operator hands the agent of an AgentInstance's spec."""
        return cls(
            specialist=RuntimeSpecialist(
                name=spec.specialist.name, system_prompt=spec.specialist.system_prompt
            ),
            model=spec.model,
            temperature=spec.temperature,
            confidence_threshold=spec.confidence_threshold,
            enabled_tools=tuple(sorted(spec.enabled_tools)),
            max_concurrent_tasks=spec.max_concurrent_tasks,
        )

    @property
    def threshold_fraction(self) -> float:
        """The confidence threshold from 0 to 1."""
        value = self.confidence_threshold
        return value if value <= 1 else value / 100

    def wire(self) -> dict[str, Any]:
        """The camelCase JSON object (only the keys that were set)."""
        data: dict[str, Any] = self.model_dump(mode="json", by_alias=True, exclude_unset=True)
        return data

    def canonical_json(self) -> str:
        """:meth:`wire` as canonical JSON (sorted keys, no spaces, UTF-8 as is)."""
        return json.dumps(self.wire(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
