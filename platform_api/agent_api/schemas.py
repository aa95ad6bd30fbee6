"""Bodies of the agent-facing API."""

from __future__ import annotations

from typing import Any

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


class ToolCallIn(BaseModel):
    """What the agent asks the proxy to run."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "action": "setInventoryLevel",
                    "params": {
                        "inventory_item_id": 808950810,
                        "location_id": 655441491,
                        "available": 42,
                    },
                    "idempotencyKey": "reconcile-october/2",
                    "task": "reconcile-october",
                    "step": "2",
                }
            ]
        },
    )

    action: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z][A-Za-z0-9_]*$")
    params: dict[str, Any] = Field(default_factory=dict)
    idempotencyKey: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="required for side-effecting actions; a repeat returns the first result",
    )
    task: str | None = Field(
        default=None, max_length=253, description="the AgenticTask (name) the call belongs to"
    )
    step: str | None = Field(default=None, max_length=100, description="the approved step's id")


class ToolCallOut(BaseModel):
    """A tool's sanitised result."""

    tool: str
    action: str
    result: dict[str, Any]
    replayed: bool = Field(description="true when this is the stored result of an earlier call")
    sideEffecting: bool
    receipt: dict[str, Any] | None = Field(
        default=None,
        description="The platform's signed receipt of the call (`humanwork.io/tool-receipt/v1`, "
        "Ed25519; see GET /v1/receipt-keys): a replay answers the very same receipt. Null "
        "when no receipt key is configured, or for a replay of a call the upstream never "
        "answered that an expert resolved or a restore recorded.",
    )
