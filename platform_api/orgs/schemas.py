"""Request and response bodies of `/orgs`."""

from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from platform_api.agents.schemas import SPEC_EXAMPLE, AgentCreate

SLUG_PATTERN = r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$"


class OrgCreate(BaseModel):
    """A new org: its slug names its namespace `org-<slug>`."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"slug": "acme", "name": "Acme Retail Ltd"},
                {
                    "slug": "acme",
                    "name": "Acme Retail Ltd",
                    "id": "3f2b8c1e-7d4a-4e9b-9c51-2a6f0d8e4b17",
                },
            ]
        },
    )

    slug: str = Field(pattern=SLUG_PATTERN, description="DNS label, 1-40 characters")
    name: str = Field(min_length=1, max_length=200)
    # the org's first agent, from a template
    agent: AgentCreate | None = Field(
        default=None,
        description="the org's first agent (name and AgentInstance spec: specialist, model, "
        "tools, LLM endpoint), created in its namespace with the org (capability "
        "`agents.manage` too); validated before anything is created",
        examples=[{"name": "shop", "spec": SPEC_EXAMPLE}],
    )
    # adopting a namespace made by GitOps
    id: uuid.UUID | None = Field(
        default=None,
        description="The org's id (default: a new one). To adopt a namespace `org-<slug>` "
        "created outside the platform (kubectl, GitOps), give the id its "
        "`humanwork.io/org-id` label carries: the namespace is kept as it is. A namespace "
        "labelled for another org, or not labelled, answers 409 `conflict`.",
    )


class OrgRead(BaseModel):
    """An org as the API shows it."""

    model_config = ConfigDict(
        from_attributes=True,
        json_schema_extra={
            "examples": [
                {
                    "id": "6f1c2b9e-2d8a-4c55-9a57-0e4f3d2b1a90",
                    "slug": "acme",
                    "name": "Acme Retail Ltd",
                    "namespace": "org-acme",
                    "created_at": "2026-01-01T12:00:00Z",
                }
            ]
        },
    )

    id: uuid.UUID
    slug: str
    name: str
    namespace: str
    created_at: datetime
    deactivated_at: datetime | None = None
    agent: str | None = Field(default=None, description="the first agent created, if any")
