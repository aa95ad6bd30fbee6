"""What every planner produces: a `Plan` of AgenticTask steps, and the `Draft` steps
the offline planner and the lookups build it from (`to_steps` gives each its risk from
`agent_image.dispatch.classify_step`, never below the action catalog's minimum)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_image.dispatch import (
    Mode,
    classify_step,
)
from agent_image.planning.config import MAX_DESCRIPTION
from agent_image.planning.periods import Period
from humanwork_core.resources import Risk, Step, StepKind

# --- plans -----------------------------------------------------------------------------------


class PlanError(ValueError):
    """A proposed plan does not fit the AgenticTask step model or the tool catalogue."""


@dataclass(frozen=True)
class Plan:
    """The steps for a request, and how they were made."""

    steps: tuple[Step, ...]
    mode: Mode
    planner: str
    """`offline` or `llm`."""
    model: str
    summary: str = ""
    warnings: tuple[str, ...] = ()

    def wire_steps(self) -> list[dict[str, Any]]:
        return [step.to_wire() for step in self.steps]


ToolReader = Callable[[str, str, dict[str, Any]], Awaitable[dict[str, Any]]]
"""A read-only tool call through the platform's proxy while planning: (tool, action,
params) -> the tool's result; raises when the call fails."""

EDIT_HINT = (
    " Its values are known only from what earlier steps find: EDIT this step's parameters "
    "({params}) when approving it."
)


@dataclass
class Draft:
    description: str
    tool: str | None
    action: str | None
    params: dict[str, Any] = field(default_factory=dict)
    kind: StepKind = StepKind.ACTION
    options: tuple[str, ...] | None = None
    risk: Risk | None = None
    sku: str | None = None
    """A Shopify write or read named by SKU: its ids are looked up while planning."""
    quantity: int | None = None
    reconcile: Period | None = None
    """A Shopify inventory reconciliation against the Amazon orders of this period."""


def to_steps(drafts: Sequence[Draft]) -> tuple[Step, ...]:
    steps: list[Step] = []
    for index, draft in enumerate(drafts, start=1):
        parameters: dict[str, Any] = {}
        if draft.kind is StepKind.ACTION:
            parameters = {"action": draft.action, "params": draft.params}
        elif draft.params:
            parameters = dict(draft.params)
        risk = classify_step(draft.tool, draft.action, draft.description, draft.risk)
        steps.append(
            Step(
                id=f"step-{index}",
                description=draft.description[:MAX_DESCRIPTION],
                kind=draft.kind,
                tool=draft.tool if draft.kind is StepKind.ACTION else None,
                parameters=parameters,
                risk=risk,
                options=draft.options,
            )
        )
    return tuple(steps)


def tool_warnings(steps: Sequence[Step], tools: Sequence[str]) -> tuple[str, ...]:
    missing = sorted({s.tool for s in steps if s.tool and s.tool not in tools})
    return tuple(
        f"tool {name!r} is not among the agent's enabled tools; the platform refuses it "
        "unless the org and the AgentInstance enable it"
        for name in missing
    )
