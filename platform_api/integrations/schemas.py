"""Request and response bodies of `/orgs/{org_id}/integrations` (responses never carry
credentials)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, SecretStr

INTEGRATION_TYPE_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,49}$"


class IntegrationPut(BaseModel):
    """The credentials of one integration, as name -> secret value."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"credentials": {"shop": "acme.myshopify.com", "access_token": "shpat_..."}}
            ]
        },
    )

    credentials: dict[str, SecretStr] = Field(min_length=1, max_length=50)


class IntegrationRead(BaseModel):
    """That an integration is configured, by whom and when (never its credentials)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"type": "shopify", "updated_at": "2026-01-01T12:00:00Z", "updated_by": "admin"}
            ]
        }
    )

    type: str
    updated_at: datetime
    updated_by: str
