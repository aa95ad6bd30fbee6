"""The language-model planner: the prompt, the `propose_plan` function schema, the
validation of what the model proposes, and the fallback to the offline planner."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from agent_image.completions import ChatModel, LLMError
from agent_image.dispatch import (
    Mode,
    choose_mode,
)
from agent_image.planning.config import AgentConfig, AuditHook, LLMGate, no_audit
from agent_image.planning.drafts import Draft, Plan, PlanError, ToolReader, to_steps, tool_warnings
from agent_image.planning.offline import is_reconciliation, offline_plan
from humanwork_core import catalog
from humanwork_core.resources import Risk, Step, StepKind

LOG = logging.getLogger("humanwork.agent.planner")


PLAN_FUNCTION = "propose_plan"
PLAN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "summary": {"type": "string"},
        "steps": {
            "type": "array",
            "minItems": 1,
            "maxItems": 20,
            "items": {
                "type": "object",
                "properties": {
                    "description": {"type": "string"},
                    "kind": {"type": "string", "enum": ["action", "input"]},
                    "tool": {"type": "string"},
                    "action": {"type": "string"},
                    "params": {"type": "object"},
                    "risk": {"type": "string", "enum": [r.value for r in Risk]},
                    "options": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["description"],
            },
        },
    },
    "required": ["steps"],
}


def _catalog_text(tools: Sequence[str]) -> str:
    lines = []
    for name in tools:
        tool = catalog.TOOLS.get(name)
        if tool is None:
            continue
        lines.append(f"- tool `{name}` ({tool.description}):")
        for action in tool.actions.values():
            effect = "WRITES (side effect)" if action.side_effect else "read-only"
            params = ", ".join([f"{p} (required)" for p in action.required] + list(action.optional))
            lines.append(
                f"  - `{action.name}` [{effect}]: {action.description}; params: {params or '-'}"
            )
    return "\n".join(lines)


def plan_prompt(config: AgentConfig, request: str, feedback: str | None, now: datetime) -> str:
    return (
        f"{config.system_prompt}\n\n"
        "Break the client's request into the smallest sequence of steps. Every step is "
        "shown to a human expert who approves it before it runs; nothing runs unapproved. "
        f"Call `{PLAN_FUNCTION}` with the steps. An action step names a tool, one of its "
        "actions and that action's params (concrete values: dates as ISO 8601 UTC). Use an "
        "input step (kind input, optionally with options) when the expert must supply "
        "content or choose. Give each step a risk: low (read-only), medium (minor "
        "reversible write), high (significant write), critical (destructive, financial, "
        "compliance). Today is "
        f"{now.date().isoformat()}.\n\nTools:\n{_catalog_text(sorted(catalog.TOOLS))}"
        + (
            f"\n\nThe expert rejected the previous plan with this feedback: {feedback}"
            if feedback
            else ""
        )
    )


def _extract_json(text: str) -> Any:
    stripped = text.strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)```", stripped, re.S)
    if fenced:
        stripped = fenced.group(1).strip()
    start = stripped.find("{")
    end = stripped.rfind("}")
    if start < 0 or end < start:
        raise PlanError("the model's answer holds no JSON object")
    try:
        return json.loads(stripped[start : end + 1])
    except ValueError as exc:
        raise PlanError(f"the model's plan is not JSON: {exc}") from None


def validate_plan(data: Any, *, tools: Sequence[str] = ()) -> tuple[tuple[Step, ...], str]:
    """A model's proposed plan as AgenticTask steps, and its summary; PlanError when it
    does not fit (no steps, an unknown tool or action, a bad shape)."""
    if not isinstance(data, Mapping):
        raise PlanError("a plan is a JSON object")
    raw_steps = data.get("steps")
    if not isinstance(raw_steps, list) or not raw_steps:
        raise PlanError("a plan has at least one step")
    if len(raw_steps) > 50:
        raise PlanError("a plan has at most 50 steps")
    drafts = [_draft(number, raw) for number, raw in enumerate(raw_steps, start=1)]
    try:
        steps = to_steps(drafts)
    except (ValidationError, ValueError) as exc:
        raise PlanError(f"the plan does not fit the step model: {exc}") from None
    return steps, str(data.get("summary") or "")[:1000]


def _draft(number: int, raw: Any) -> Draft:
    """Step `number` of a model's plan as a draft; PlanError when it does not fit."""
    if not isinstance(raw, Mapping):
        raise PlanError(f"step {number} is not an object")
    description = str(raw.get("description") or "").strip()
    if not description:
        raise PlanError(f"step {number} has no description")
    kind = StepKind(str(raw.get("kind") or "action").lower())
    given = raw.get("parameters")
    parameters: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
    action = raw.get("action") or parameters.get("action")
    params = raw.get("params", parameters.get("params", {}))
    risk_value = raw.get("risk")
    try:
        risk = Risk(str(risk_value).lower()) if risk_value else None
    except ValueError:
        raise PlanError(f"step {number} has an unknown risk {risk_value!r}") from None
    if kind is StepKind.ACTION:
        tool = catalog.tool_name(str(raw.get("tool") or ""))
        _check_action(number, raw.get("tool"), tool, action, params)
        return Draft(description, tool, str(action), dict(params), risk=risk)
    options = raw.get("options")
    return Draft(
        description,
        None,
        None,
        dict(params) if isinstance(params, Mapping) else {},
        kind=StepKind.INPUT,
        options=tuple(str(o) for o in options) if options else None,
        risk=risk or Risk.LOW,
    )


def _check_action(number: int, named: Any, tool: str, action: Any, params: Any) -> None:
    """The tool and action are in the catalog and `params` are exactly the action's."""
    if tool not in catalog.TOOLS:
        raise PlanError(f"step {number} names an unknown tool {named!r}")
    known = catalog.find(tool, str(action or ""))
    if known is None:
        raise PlanError(f"step {number}: {tool} has no action {action!r}")
    if not isinstance(params, Mapping):
        raise PlanError(f"step {number}: params must be an object")
    unknown = sorted(str(p) for p in params if p not in known.param_names)
    missing = [p for p in known.required if params.get(p) is None]
    if unknown or missing:
        takes = ", ".join(known.param_names) or "no params"
        raise PlanError(
            f"step {number}: {tool}.{action} takes {takes} (unknown {unknown}, missing {missing})"
        )


class Planner:
    """Plans requests: with the language model when usable, offline otherwise (and on
    any failure or unusable answer of the model)."""

    def __init__(
        self, gate: LLMGate, audit: AuditHook = no_audit, reader: ToolReader | None = None
    ) -> None:
        self.gate = gate
        self.audit = audit
        self.reader = reader

    async def plan(
        self,
        request: str,
        config: AgentConfig,
        *,
        feedback: str | None = None,
        now: datetime | None = None,
    ) -> Plan:
        now = now or datetime.now(UTC)
        mode = choose_mode(request, config.default_mode)
        llm = self.gate.usable()
        reader = self.reader if config.planning_lookups else None
        skill = reader is not None and is_reconciliation(request)
        if llm is not None and config.model and not skill:
            try:
                return await self._llm_plan(llm, request, config, feedback, now, mode)
            except LLMError as exc:
                self.gate.failed(exc)
            except PlanError as exc:
                LOG.warning("the model's plan is unusable, planning offline: %s", exc)
        return await offline_plan(
            request, now=now, tools=config.tools, feedback=feedback, mode=mode, reader=reader
        )

    async def _llm_plan(
        self,
        llm: ChatModel,
        request: str,
        config: AgentConfig,
        feedback: str | None,
        now: datetime,
        mode: Mode,
    ) -> Plan:
        messages = [
            {"role": "system", "content": plan_prompt(config, request, feedback, now)},
            {"role": "user", "content": request},
        ]
        tool = {
            "type": "function",
            "function": {
                "name": PLAN_FUNCTION,
                "description": "Propose the plan of steps for the request.",
                "parameters": PLAN_SCHEMA,
            },
        }
        completion = await llm.complete(
            messages,
            model=config.model,
            temperature=config.temperature,
            tools=[tool],
            tool_choice={"type": "function", "function": {"name": PLAN_FUNCTION}},
        )
        self.gate.succeeded()
        await self.audit(completion, "plan")
        call = next((c for c in completion.tool_calls if c.name == PLAN_FUNCTION), None)
        data = call.arguments if call is not None else _extract_json(completion.content)
        steps, summary = validate_plan(data, tools=config.tools)
        return Plan(
            steps=steps,
            mode=mode,
            planner="llm",
            model=completion.model,
            summary=summary,
            warnings=tool_warnings(steps, config.tools),
        )
