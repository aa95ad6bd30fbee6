"""Bodies of the agent-facing API."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class AgentIdentity(BaseModel):
    """The agent an agent token stands for."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "agentId": "org-acme/acme-ecommerce",
                    "orgId": "3f2b8c1e-7d4a-4e9b-9c51-2a6f0d8e4b17",
                    "namespace": "org-acme",
                    "scopes": ["callbacks:write", "context:read", "tools:execute"],
                }
            ]
        }
    )

    agentId: str = Field(description="`<namespace>/<AgentInstance name>`")
    orgId: str = Field(description="the org the agent works for")
    namespace: str = Field(description="the org's namespace")
    scopes: list[str] = Field(description="what the token allows")


class RotationRequested(BaseModel):
    """A token rotation the operator will carry out at once."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "agentId": "org-acme/acme-ecommerce",
                    "rotationRequestedAt": "2026-11-29T16:40:00+00:00",
                }
            ]
        }
    )

    agentId: str = Field(description="`<namespace>/<AgentInstance name>`")
    rotationRequestedAt: str = Field(description="when the rotation was asked for")
