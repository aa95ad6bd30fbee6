"""The org's settings for its clients (`GET`/`PUT /orgs/{id}/client-settings`): whether
its clients see each other's conversations, the risks the initiating client must confirm,
and the admin's rule under which a reply to a client skips review. Read by the dispatch
and confirmation flows from the org's columns; written here only."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.ext.asyncio import AsyncSession

from humanwork_core.risk import Risk
from platform_api.errors import NotFound
from platform_api.floor.audit.service import record
from platform_api.floor.principal import OrgScope
from platform_api.models import Org

DEFAULT_CONFIRM = (Risk.HIGH, Risk.CRITICAL)
"""The risks a client confirms when the org named none (`client_confirm_risks` null)."""


class AutoSend(BaseModel):
    """A reply to a client skips review only when its risk is at most `max_risk` and the
    platform's confidence at least `min_confidence`."""

    model_config = ConfigDict(extra="forbid")

    max_risk: Risk
    min_confidence: float = Field(ge=0, le=1, description="0 to 1")


class ClientSettings(BaseModel):
    """The org's settings for its clients (a PUT replaces them all: a field left out
    takes its default)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "clients_share_conversations": False,
                    "client_confirm_risks": ["high", "critical"],
                    "reply_auto_send": None,
                }
            ]
        },
    )

    clients_share_conversations: bool = Field(
        default=False, description="the org's clients see each other's conversations"
    )
    client_confirm_risks: list[Risk] = Field(
        default_factory=lambda: list(DEFAULT_CONFIRM),
        max_length=4,
        description="the risks of a step the initiating client must confirm ([]: none)",
    )
    reply_auto_send: AutoSend | None = Field(
        default=None, description="when a reply to a client skips review (null: never)"
    )


def of_org(org: Org) -> ClientSettings:
    risks = DEFAULT_CONFIRM if org.client_confirm_risks is None else org.client_confirm_risks
    return ClientSettings(
        clients_share_conversations=bool(org.clients_share_conversations),
        client_confirm_risks=[Risk(r) for r in risks],
        reply_auto_send=(
            AutoSend.model_validate(org.reply_auto_send) if org.reply_auto_send else None
        ),
    )


async def _org(session: AsyncSession, scope: OrgScope) -> Org:
    org = await session.get(Org, scope.org_id)
    if org is None:
        raise NotFound("no such org")
    return org


async def get_settings(session: AsyncSession, scope: OrgScope) -> ClientSettings:
    return of_org(await _org(session, scope))


async def put_settings(
    session: AsyncSession, scope: OrgScope, body: ClientSettings
) -> ClientSettings:
    """Replace the org's client settings (audited `org.client_settings`)."""
    org = await _org(session, scope)
    risks = sorted(set(body.client_confirm_risks), key=lambda r: r.rank)
    org.clients_share_conversations = body.clients_share_conversations
    org.client_confirm_risks = [r.value for r in risks]
    org.reply_auto_send = (
        body.reply_auto_send.model_dump(mode="json") if body.reply_auto_send else None
    )
    await session.flush()
    stored = of_org(org)
    await record(
        session,
        actor=scope.principal.username,
        action="org.client_settings",
        target=f"org:{scope.org_id}",
        org_id=scope.org_id,
        details=stored.model_dump(mode="json"),
    )
    return stored
