"""The responder: draft replies for chat, from a language model or offline (from the
expert corrections the agent was given, or a holding reply that goes to the queue)."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_image.completions import ChatModel, Completion, Delta, LLMError
from agent_image.corrections import CorrectionStore, Match
from agent_image.dispatch import (
    Mode,
    choose_mode,
    risk_of_message,
)
from agent_image.planning.config import (
    CORRECTION_MATCH,
    OFFLINE_MODEL,
    AgentConfig,
    AuditHook,
    LLMGate,
    no_audit,
)
from humanwork_core import catalog
from humanwork_core.resources import Risk

LOG = logging.getLogger("humanwork.agent.planner")


# --- replies ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    """A drafted reply to a client message (seed 002 UC-1)."""

    reply: str
    confidence: float
    risk_level: Risk
    flag_for_review: bool
    model: str
    mode: Mode
    responder: str
    """`offline` or `llm`."""
    usage: dict[str, int] = field(default_factory=dict)
    corrections_used: tuple[str, ...] = ()
    tool_calls: tuple[dict[str, Any], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "reply": self.reply,
            "confidence": round(self.confidence, 3),
            "risk_level": self.risk_level.value,
            "flag_for_review": self.flag_for_review,
            "model": self.model,
            "usage": self.usage,
            "mode": self.mode.value,
            "responder": self.responder,
            "corrections_used": list(self.corrections_used),
            "tool_calls": list(self.tool_calls),
        }


ToolRunner = Callable[[str, str, dict[str, Any]], Awaitable[dict[str, Any]]]
"""Runs a read-only tool call for the chat (tool, action, params) -> result."""


def _flag(confidence: float, risk: Risk, threshold: float) -> bool:
    return confidence < threshold or risk in (Risk.HIGH, Risk.CRITICAL)


def offline_reply(
    message: str, config: AgentConfig, matches: Sequence[Match], mode: Mode, risk: Risk
) -> Reply:
    """The offline responder's whole reply (see :func:`offline_reply_text`)."""
    text, confidence, used = offline_reply_text(message, config, matches, mode)
    return Reply(
        reply=text,
        confidence=confidence,
        risk_level=risk,
        flag_for_review=_flag(confidence, risk, config.confidence_threshold),
        model=OFFLINE_MODEL,
        mode=mode,
        responder="offline",
        corrections_used=used,
    )


def offline_reply_text(
    message: str, config: AgentConfig, matches: Sequence[Match], mode: Mode
) -> tuple[str, float, tuple[str, ...]]:
    """The offline responder: the expert's corrected reply of a close enough correction
    (confidence from its closeness), else a holding reply (confidence 0.3, so that an
    expert reviews it)."""
    best = matches[0] if matches else None
    if best is not None and best.score >= CORRECTION_MATCH:
        confidence = min(0.95, 0.5 + best.score / 2)
        return best.correction.corrected, confidence, (best.correction.id,)
    if mode is Mode.AGENTIC:
        body = (
            "this needs several steps, so I will prepare a plan; an expert approves each "
            "step before anything is changed."
        )
    else:
        body = "I am looking into it and will come back to you shortly with the details."
    text = f"Hi, this is {config.specialist_name}. Thanks for your message: {body}"
    return text, 0.3, ()


def _few_shot(matches: Sequence[Match]) -> list[dict[str, str]]:
    shots: list[dict[str, str]] = []
    for match in reversed(matches):  # closest last, nearest the question
        shots.append({"role": "user", "content": match.correction.message})
        shots.append({"role": "assistant", "content": match.correction.corrected})
    return shots


def chat_functions(tools: Sequence[str]) -> list[dict[str, Any]]:
    """The read-only actions of the enabled tools, as functions for domain mode."""
    functions = []
    for name in tools:
        tool = catalog.TOOLS.get(name)
        for action in tool.actions.values() if tool else ():
            if action.side_effect:
                continue
            functions.append(
                {
                    "type": "function",
                    "function": {
                        "name": f"{name}__{action.name}",
                        "description": f"{tool.description if tool else name}: "
                        f"{action.description}",
                        "parameters": action.json_schema(),
                    },
                }
            )
    return functions


_CONFIDENCE = re.compile(r"\b(10|[1-9])(?:\s*/\s*10)?\b")


class Responder:
    """Draft replies for chat, with the model when usable, offline otherwise."""

    def __init__(
        self,
        gate: LLMGate,
        corrections: CorrectionStore,
        audit: AuditHook = no_audit,
        tool_runner: ToolRunner | None = None,
    ) -> None:
        self.gate = gate
        self.corrections = corrections
        self.audit = audit
        self.tool_runner = tool_runner

    def _messages(
        self,
        message: str,
        config: AgentConfig,
        history: Sequence[Mapping[str, Any]],
        context: Sequence[str],
        matches: Sequence[Match],
    ) -> list[dict[str, Any]]:
        system = config.system_prompt
        if context:
            system += "\n\nRelevant knowledge of the org:\n" + "\n".join(
                f"- {c[:800]}" for c in context[:5]
            )
        if matches:
            system += "\n\nExperts corrected earlier replies; follow the examples that come next."
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
        messages += _few_shot(matches)
        for item in history[-20:]:
            role = str(item.get("role") or "user")
            content = str(item.get("content") or "")
            if role in ("user", "assistant", "system") and content:
                messages.append({"role": role, "content": content})
        messages.append({"role": "user", "content": message})
        return messages

    async def _confidence(
        self, llm: ChatModel, config: AgentConfig, message: str, reply: str
    ) -> float | None:
        try:
            rated = await llm.complete(
                [
                    {
                        "role": "system",
                        "content": "Rate how confident you are that the reply fully and "
                        "correctly answers the client, from 1 (not at all) to 10 (certain). "
                        "Answer with the number only.",
                    },
                    {"role": "user", "content": f"Client: {message}\n\nReply: {reply}"},
                ],
                model=config.model,
                temperature=0.0,
                max_tokens=5,
            )
        except LLMError as exc:
            LOG.warning("confidence scoring failed: %s", exc)
            return None
        await self.audit(rated, "confidence")
        found = _CONFIDENCE.search(rated.content)
        return int(found.group(1)) / 10 if found else None

    async def _run_tools(self, completion: Completion) -> list[dict[str, Any]]:
        results = []
        for call in completion.tool_calls:
            tool, _, action = call.name.partition("__")
            known = catalog.find(tool, action)
            if known is None or known.side_effect or self.tool_runner is None:
                outcome: dict[str, Any] = {
                    "error": "not available in a chat reply: changes need a task that an "
                    "expert approves"
                }
            else:
                try:
                    outcome = await self.tool_runner(tool, action, dict(call.arguments))
                except Exception as exc:  # any tool failure goes to the model
                    outcome = {"error": str(exc)[:500]}
            results.append({"id": call.id, "tool": tool, "action": action, "result": outcome})
        return results

    async def reply(
        self,
        message: str,
        config: AgentConfig,
        *,
        history: Sequence[Mapping[str, Any]] = (),
        context: Sequence[str] = (),
    ) -> Reply:
        mode = choose_mode(message, config.default_mode)
        risk = risk_of_message(message)
        matches = self.corrections.closest(message)
        llm = self.gate.usable()
        if llm is not None and config.model:
            try:
                return await self._llm_reply(
                    llm, message, config, history, context, matches, mode, risk
                )
            except LLMError as exc:
                self.gate.failed(exc)
        return offline_reply(message, config, matches, mode, risk)

    async def _llm_reply(
        self,
        llm: ChatModel,
        message: str,
        config: AgentConfig,
        history: Sequence[Mapping[str, Any]],
        context: Sequence[str],
        matches: Sequence[Match],
        mode: Mode,
        risk: Risk,
    ) -> Reply:
        messages = self._messages(message, config, history, context, matches)
        functions = chat_functions(config.tools) if mode is Mode.DOMAIN and self.tool_runner else []
        completion = await llm.complete(
            messages, model=config.model, temperature=config.temperature, tools=functions or None
        )
        self.gate.succeeded()
        await self.audit(completion, "chat")
        usage = completion.usage
        calls: list[dict[str, Any]] = []
        if completion.tool_calls:
            calls = await self._run_tools(completion)
            messages.extend(_tool_messages(completion, calls))
            completion = await llm.complete(
                messages, model=config.model, temperature=config.temperature
            )
            await self.audit(completion, "chat")
            usage = usage.plus(completion.usage)
        confidence = await self._confidence(llm, config, message, completion.content)
        if confidence is None:
            confidence = 0.5
        return Reply(
            reply=completion.content,
            confidence=confidence,
            risk_level=risk,
            flag_for_review=_flag(confidence, risk, config.confidence_threshold),
            model=completion.model,
            mode=mode,
            responder="llm",
            usage=usage.as_dict(),
            corrections_used=tuple(m.correction.id for m in matches),
            tool_calls=tuple({"tool": c["tool"], "action": c["action"]} for c in calls),
        )

    async def stream(
        self,
        message: str,
        config: AgentConfig,
        *,
        history: Sequence[Mapping[str, Any]] = (),
        context: Sequence[str] = (),
    ) -> AsyncIterator[str | Reply]:
        """The reply as text pieces while they are produced, then the whole :class:`Reply`."""
        mode = choose_mode(message, config.default_mode)
        risk = risk_of_message(message)
        matches = self.corrections.closest(message)
        llm = self.gate.usable()
        if llm is not None and config.model:
            messages = self._messages(message, config, history, context, matches)
            final: Completion | None = None
            sent_any = False
            try:
                async for item in llm.stream(
                    messages, model=config.model, temperature=config.temperature
                ):
                    if isinstance(item, Delta):
                        sent_any = True
                        yield item.text
                    else:
                        final = item
            except LLMError as exc:
                self.gate.failed(exc)
                if sent_any:
                    raise
            if final is not None:
                self.gate.succeeded()
                await self.audit(final, "chat")
                confidence = await self._confidence(llm, config, message, final.content)
                confidence = 0.5 if confidence is None else confidence
                yield Reply(
                    reply=final.content,
                    confidence=confidence,
                    risk_level=risk,
                    flag_for_review=_flag(confidence, risk, config.confidence_threshold),
                    model=final.model,
                    mode=mode,
                    responder="llm",
                    usage=final.usage.as_dict(),
                    corrections_used=tuple(m.correction.id for m in matches),
                )
                return
        reply = offline_reply(message, config, matches, mode, risk)
        for piece in re.findall(r"\S+\s*", reply.reply):
            yield piece
        yield reply


def _tool_messages(
    completion: Completion, calls: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The assistant's tool calls and each tool's result, as the model's next messages."""
    messages: list[dict[str, Any]] = [
        {
            "role": "assistant",
            "content": completion.content or None,
            "tool_calls": [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.raw_arguments},
                }
                for c in completion.tool_calls
            ],
        }
    ]
    for call in calls:
        messages.append(
            {
                "role": "tool",
                "tool_call_id": call["id"],
                "content": json.dumps(call["result"], default=str)[:8000],
            }
        )
    return messages
