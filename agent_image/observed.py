"""The model and tool calls the agent's planner and responder make, each reported to the
platform as an event: `llm.called` (model, tokens, cost, latency, the prompt's version) and
`tool.called` (a read through the platform's proxy: its outcome and latency). Built before
the :class:`agent_image.runtime.Runtime` from the pieces it reports with, so the planner and
the responder get plain callables, never the runtime."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent_image.completions import Completion
from agent_image.events import EventSender
from agent_image.platform import PlatformClient, PlatformError


@dataclass(frozen=True)
class Observed:
    """Reads and model calls, reported. `config_hash` names the effective configuration
    (the prompt's version) at the time of a call."""

    events: EventSender
    platform: PlatformClient
    config_hash: Callable[[], str]

    async def audit_llm(self, completion: Completion, purpose: str) -> None:
        payload = completion.audit(purpose)
        payload["promptVersion"] = self.config_hash()
        await self.events.emit("llm.called", payload=payload)

    async def read_tool(
        self, tool: str, action: str, params: dict[str, Any], purpose: str = "plan"
    ) -> dict[str, Any]:
        """A read-only tool call through the platform's proxy (planning and chat need no
        approval for reads); the tool's result; emits `tool.called`; raises PlatformError."""
        key = str(uuid.uuid4())
        started = time.perf_counter()
        outcome = "ok"
        try:
            answer = await self.platform.call_tool(
                tool, action, params, key, None, None, attempts=2
            )
        except PlatformError as exc:
            outcome = exc.code
            raise
        finally:
            await self.events.emit(
                "tool.called",
                payload={
                    "tool": tool,
                    "action": action,
                    "params": params,
                    "purpose": purpose,
                    "outcome": outcome,
                    "latencyMs": round((time.perf_counter() - started) * 1000, 1),
                    "idempotencyKey": key,
                },
            )
        result = answer.get("result", answer)
        return dict(result) if isinstance(result, dict) else {"value": result}

    async def run_tool(self, tool: str, action: str, params: dict[str, Any]) -> dict[str, Any]:
        """A read-only tool call for a chat reply; an error becomes the result."""
        try:
            return await self.read_tool(tool, action, params, purpose="chat")
        except PlatformError as exc:
            return {"error": exc.to_dict()}
