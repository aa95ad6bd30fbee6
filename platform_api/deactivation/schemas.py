"""Bodies of `POST /orgs/{org_id}/deactivate` and `/reactivate`."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field


class DeactivateBody(BaseModel):
    """Why the org is switched off (recorded on its cancelled tasks and in the audit log)."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"reason": "contract ended"}]}
    )

    reason: str = Field(default="org deactivated", min_length=1, max_length=500)


class ReactivateBody(BaseModel):
    """Whether to recreate the agents the deactivation deleted (from their kept specs)."""

    model_config = ConfigDict(extra="forbid")

    restoreAgents: bool = True


class OrgLifecycle(BaseModel):
    """What a deactivation or a reactivation did."""

    orgId: str
    active: bool
    deactivatedAt: datetime | None
    deactivatedBy: str | None
    agents: list[str] = Field(
        description="deactivate: the agents deleted (their specs kept); reactivate: the "
        "agents recreated"
    )
    cancelledTasks: list[str] = Field(default_factory=list)
