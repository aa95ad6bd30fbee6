"""Request and response bodies of the webhook endpoints."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from platform_api.notify.events import EVENTS, WEBHOOK_EVENTS


class WebhookPut(BaseModel):
    """An org's webhook: where to POST its events, which ones, and optionally the secret."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(min_length=1, max_length=2048, description="https URL of the receiver")
    events: list[Annotated[str, Field(max_length=50)]] = Field(
        default_factory=lambda: list(WEBHOOK_EVENTS),
        max_length=len(EVENTS),
        description=f"events to deliver, of: {', '.join(EVENTS)} (default: all but decided)",
    )
    secret: SecretStr | None = Field(
        default=None,
        min_length=32,
        max_length=200,
        description="the signing secret (at least 32 characters); omitted: the platform "
        "generates one and answers it once",
    )

    @field_validator("events")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        unknown = sorted(set(value) - set(EVENTS))
        if unknown:
            raise ValueError(f"unknown events: {', '.join(unknown)}")
        return sorted(set(value), key=EVENTS.index)


class WebhookRead(BaseModel):
    """An org's webhook as answered: never its secret, except once when generated."""

    org_id: uuid.UUID
    url: str
    events: list[str]
    updated_by: str
    updated_at: datetime


class WebhookSet(WebhookRead):
    """The answer to setting a webhook: with the secret when the platform generated it."""

    secret: str | None = Field(
        default=None,
        description="the generated signing secret: answered by the PUT that generated it, "
        "never again",
    )


class DeliveryRead(BaseModel):
    """One delivery and its attempts."""

    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    event_id: str
    event: str
    state: str = Field(description="pending, delivered or failed")
    attempt_count: int
    attempts: list[dict[str, Any]]
    next_attempt_at: datetime
    created_at: datetime
    delivered_at: datetime | None


class DeliveryPage(BaseModel):
    items: list[DeliveryRead]
    total: int
