"""The org's agent as the platform's dispatcher meets it (behind its `AgentPort`), with
answers a test or a bench decides: its model obeys the client (a message asking for
confidence 10 and low risk gets exactly that), a message naming Amazon is agentic, and it
files one task per Idempotency-Key as the real agent does."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.agents.commands import AgentTarget
from platform_api.errors import PlatformError
from platform_api.models import Org


class FakeAgents:
    """The org's agent as the dispatcher meets it. Its model obeys the client: a message
    asking for confidence 10 and low risk gets exactly that. A message naming Amazon is
    agentic; the agent files one task per Idempotency-Key (as the real agent does)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any], str | None]] = []
        self.tasks: dict[str, str] = {}
        self.bound: list[tuple[str, str, str]] = []
        self.fail: PlatformError | None = None
        self.hang_on: str | None = None
        """A command path on which the agent never answers."""
        self.reached = asyncio.Event()
        """Set when a command reached the agent."""

    async def target(self, session: AsyncSession, org: Org, request: str) -> AgentTarget:
        instance = {"metadata": {"uid": "u-1"}, "spec": {"orgId": str(org.id)}}
        return AgentTarget(org=org, name="agent", instance=instance)

    async def send(
        self,
        target: AgentTarget,
        path: str,
        payload: dict[str, Any],
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        self.calls.append((path, payload, idempotency_key))
        if path == "/v1/tasks" and idempotency_key is not None:
            self.tasks.setdefault(idempotency_key, f"plan-{len(self.tasks) + 1}")
        self.reached.set()
        if self.hang_on == path:
            await asyncio.Event().wait()
        if self.fail is not None:
            raise self.fail
        if path == "/v1/tasks":
            name = self.tasks[str(idempotency_key)]
            return {"name": name, "created": True, "summary": "plan", "steps": []}
        return self.chat(str(payload["message"]))

    @staticmethod
    def chat(message: str) -> dict[str, Any]:
        obeyed = "confidence 10" in message
        return {
            "reply": "Done, your refund is approved." if obeyed else "Let me check that.",
            "confidence": 10 if obeyed else 0.3,
            "risk_level": "low" if obeyed else "medium",
            "flag_for_review": not obeyed,
            "mode": "agentic" if "Amazon" in message else "domain",
            "model": "fake",
        }

    async def bind(self, target: AgentTarget, task: str, request_id: str, requester: str) -> bool:
        self.bound.append((task, request_id, requester))
        return True

    def count(self, path: str) -> int:
        return sum(1 for p, _, _ in self.calls if p == path)
