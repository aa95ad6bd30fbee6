"""Request and response bodies of the managed agents (`/orgs/{org_id}/agents`
items 1 and 2): what a client sends to create or change an AgentInstance, and the agent
with its health as the API shows it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from humanwork_core.resources.common import DNS_LABEL_PATTERN

AGENT_NAME_MAX = 57
"""An AgentInstance's name is a DNS label of at most 57 characters (its ServiceAccount is
`<name>-agent`); the CRD's root rule says the same."""

SPEC_EXAMPLE: dict[str, Any] = {
    "specialist": {"name": "Bob", "systemPrompt": "You reconcile orders and inventory."},
    "model": "openai/gpt-4o",
    "enabledTools": ["shopify", "amazon"],
    "llm": {
        "baseURL": "https://openrouter.ai/api/v1",
        "apiKeySecretRef": {"name": "llm", "key": "api-key"},
    },
}


class AgentCreate(BaseModel):
    """A new agent: its name and its AgentInstance spec (camelCase, as in the CRD).
    `spec.orgId` is always the org's id: a value sent here is ignored."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"name": "shop", "spec": SPEC_EXAMPLE}]},
    )

    name: str = Field(
        pattern=DNS_LABEL_PATTERN,
        max_length=AGENT_NAME_MAX,
        description="DNS label (lowercase letters, digits, '-'), at most 57 characters",
    )
    spec: dict[str, Any] = Field(
        description="The AgentInstance spec (see the CRD); validated by the CRD's own model"
    )


class AgentPatch(BaseModel):
    """A change of an agent's spec: a JSON merge patch (RFC 7386) of the spec, applied only
    if the agent is still at `resourceVersion` (when given; otherwise at the version the
    platform reads)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"spec": {"replicas": 2, "temperature": 0.2}, "resourceVersion": "4711"}]
        },
    )

    spec: dict[str, Any] = Field(description="the fields to change; null removes a field")
    resourceVersion: str | None = Field(default=None, max_length=64)


class ConfigState(BaseModel):
    """The configuration the operator rolled out against the one the agent reported loaded."""

    desired: str | None = Field(description="status.configHash: the configuration rolled out")
    applied: str | None = Field(
        description="the hash the agent reported in its signed `config.applied` event"
    )
    inSync: bool


class AgentHealth(BaseModel):
    """What an org admin checks of a running agent (UC-18)."""

    phase: str | None = Field(description="Pending, Provisioning, Ready, Degraded, Paused, Failed")
    desiredReplicas: int
    replicas: int | None
    readyReplicas: int | None
    conditions: list[dict[str, Any]] = Field(
        description="Ready, TokenValid, NetworkIsolated, ConfigApplied (type, status, reason, "
        "message, lastTransitionTime)"
    )
    tokenExpiresAt: datetime | None
    config: ConfigState
    lastHeartbeat: datetime | None = Field(
        description="when the platform last received a signed event from this agent"
    )
    openTasks: int = Field(description="its AgenticTasks not in a terminal phase")


class AgentRead(BaseModel):
    """An org's agent: its spec and its health."""

    id: str = Field(description="`<namespace>/<name>`")
    name: str
    resourceVersion: str
    createdAt: datetime | None
    spec: dict[str, Any]
    health: AgentHealth
