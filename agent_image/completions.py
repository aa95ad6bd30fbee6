"""What a chat model answers, and the protocol the planner and the responder call it
through: :class:`Completion` (text, tool calls, usage, latency), :class:`Delta` (a piece
of a streamed answer), :class:`LLMError`, and :class:`ChatModel`, which
:class:`agent_image.llm.LLMClient` implements over httpx. Pure: the planner and the
responder import this module, never the client (an import contract keeps it so), so they
can be driven by any object that answers like a model."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

PRICES_PER_MILLION: Mapping[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1": (2.00, 8.00),
    "claude-3-5-haiku": (0.80, 4.00),
    "claude-3-5-sonnet": (3.00, 15.00),
    "claude-sonnet-4": (3.00, 15.00),
}
"""USD per million prompt and completion tokens of some well-known models (list prices;
an estimate for the audit, not a bill). Longest matching name wins."""

Message = Mapping[str, Any]


def cost_estimate(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """Estimated USD cost of a call, or None for a model without a known price."""
    name = model.lower().rsplit("/", 1)[-1]
    known = [key for key in PRICES_PER_MILLION if name.startswith(key)]
    if not known:
        return None
    prompt_price, completion_price = PRICES_PER_MILLION[max(known, key=len)]
    return round((prompt_tokens * prompt_price + completion_tokens * completion_price) / 1e6, 8)


class LLMError(Exception):
    """The model could not answer: refused (4xx), failing after retries, or garbage."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        attempts: int = 1,
        kind: str = "malformed",
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.attempts = attempts
        self.kind = kind
        """`refused` (a 4xx not worth retrying), `unavailable` (unreachable, 5xx or 429
        after the retries, a broken stream) or `malformed` (an answer that is no
        completion): the outcome label of `humanwork_agent_llm_calls_total`."""


@dataclass(frozen=True)
class ToolCall:
    """A function call the model asked for."""

    id: str
    name: str
    arguments: dict[str, Any]
    raw_arguments: str


@dataclass(frozen=True)
class Usage:
    """Tokens of one call."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0

    @classmethod
    def from_json(cls, data: Any) -> Usage:
        if not isinstance(data, Mapping):
            return cls()
        prompt = int(data.get("prompt_tokens") or 0)
        completion = int(data.get("completion_tokens") or 0)
        return cls(prompt, completion, int(data.get("total_tokens") or prompt + completion))

    def plus(self, other: Usage) -> Usage:
        """The tokens of both calls."""
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.total_tokens + other.total_tokens,
        )

    def as_dict(self) -> dict[str, int]:
        return {
            "promptTokens": self.prompt_tokens,
            "completionTokens": self.completion_tokens,
            "totalTokens": self.total_tokens,
        }


@dataclass(frozen=True)
class Completion:
    """A model's answer, with what the audit needs."""

    content: str
    model: str
    usage: Usage = field(default_factory=Usage)
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None
    latency_ms: float = 0.0
    attempts: int = 1

    @property
    def cost_usd(self) -> float | None:
        return cost_estimate(self.model, self.usage.prompt_tokens, self.usage.completion_tokens)

    def audit(self, purpose: str) -> dict[str, Any]:
        """The payload of the `llm.called` event for this call."""
        return {
            "purpose": purpose,
            "model": self.model,
            **self.usage.as_dict(),
            "costUsd": self.cost_usd,
            "latencyMs": round(self.latency_ms, 1),
            "attempts": self.attempts,
            "finishReason": self.finish_reason,
            "toolCalls": [c.name for c in self.tool_calls],
        }


@dataclass(frozen=True)
class Delta:
    """A piece of streamed text."""

    text: str


class ChatModel(Protocol):
    """A chat model: one completion, or a streamed one (its :class:`Delta` pieces, then the
    whole :class:`Completion`)."""

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        model: str,
        temperature: float | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        response_format: Mapping[str, Any] | None = None,
        max_tokens: int | None = None,
    ) -> Completion: ...

    def stream(
        self,
        messages: Sequence[Message],
        *,
        model: str,
        temperature: float | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_tokens: int | None = None,
    ) -> AsyncIterator[Delta | Completion]: ...
