"""`Agent`: an authenticated agent as seen by one request (a plain value built by
`agent_api.auth`, read by the tool proxy and the context endpoints below it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Agent:
    """An authenticated agent."""

    agent_id: str
    namespace: str
    name: str
    org_id: str
    scopes: frozenset[str]
    jti: str
    enabled_tools: frozenset[str] = frozenset()
    """The AgentInstance's `spec.enabledTools`: the only tools the proxy runs for it."""
