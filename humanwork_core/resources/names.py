"""The names every client of the custom resources spells the same way: the plurals of the
REST paths (read off each resource's `CrdInfo`, which the CRDs are generated from) and the
field manager of each component's writes (what `managedFields` and the audit log show)."""

from __future__ import annotations

from .agentictask import AgenticTask
from .agentinstance import AgentInstance

TASKS = AgenticTask.crd.plural
"""`agentictasks`."""
INSTANCES = AgentInstance.crd.plural
"""`agentinstances`."""

OPERATOR_FIELD_MANAGER = "humanwork-operator"
PLATFORM_FIELD_MANAGER = "humanwork-platform-api"
AGENT_FIELD_MANAGER = "humanwork-agent"
