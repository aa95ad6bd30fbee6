"""An org's webhook: set (URL checked, secret generated or given, sealed), read (never
the secret), remove; its deliveries. Each change is audited, without the secret."""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from humanwork_core import signing
from platform_api.errors import NotFound
from platform_api.floor.audit.service import record
from platform_api.floor.principal import OrgScope
from platform_api.integrations.crypto import CredentialCipher
from platform_api.models import Webhook
from platform_api.notify.delivery import seal_secret
from platform_api.notify.repository import WebhookRepository
from platform_api.notify.schemas import (
    DeliveryPage,
    DeliveryRead,
    WebhookPut,
    WebhookRead,
    WebhookSet,
)
from platform_api.notify.urls import check_webhook_url
from platform_api.notify.wakeup import utcnow
from platform_api.tools.upstreams.egress import Egress


async def put_webhook(
    session: AsyncSession,
    scope: OrgScope,
    body: WebhookPut,
    egress: Egress,
    cipher: CredentialCipher | None,
) -> WebhookSet:
    """Set the org's webhook; answers the generated secret once (none when given)."""
    url = await check_webhook_url(body.url, egress)
    generated = signing.generate_secret() if body.secret is None else None
    secret = generated or (body.secret.get_secret_value() if body.secret else "")
    sealed = seal_secret(cipher, scope.org_id, secret)
    repo = WebhookRepository(session)
    before = await repo.get(scope.org_id)
    hook = await repo.put(
        Webhook(
            org_id=scope.org_id,
            url=url,
            events=body.events,
            key_id=sealed.key_id or None,
            nonce=sealed.nonce or None,
            secret=sealed.ciphertext,
            updated_by=scope.principal.username,
            updated_at=utcnow(),
        )
    )
    await record(
        session,
        actor=scope.principal.username,
        action="org.webhook.updated",
        target=f"org:{scope.org_id}",
        org_id=scope.org_id,
        details={
            "before": {"url": before.url, "events": before.events} if before else None,
            "after": {"url": url, "events": body.events},
            "secret": "generated" if generated else "given",
        },
    )
    return WebhookSet(**_read(hook).model_dump(), secret=generated)


def _read(hook: Webhook) -> WebhookRead:
    """The webhook as answered: built field by field, so the stored secret never is."""
    return WebhookRead(
        org_id=hook.org_id,
        url=hook.url,
        events=list(hook.events),
        updated_by=hook.updated_by,
        updated_at=hook.updated_at,
    )


async def get_webhook(session: AsyncSession, org_id: uuid.UUID) -> WebhookRead:
    hook = await WebhookRepository(session).get(org_id)
    if hook is None:
        raise NotFound("the org has no webhook")
    return _read(hook)


async def delete_webhook(session: AsyncSession, scope: OrgScope) -> None:
    """Remove the webhook; its pending deliveries go with it."""
    if not await WebhookRepository(session).remove(scope.org_id):
        raise NotFound("the org has no webhook")
    await record(
        session,
        actor=scope.principal.username,
        action="org.webhook.deleted",
        target=f"org:{scope.org_id}",
        org_id=scope.org_id,
    )


async def deliveries(
    session: AsyncSession, org_id: uuid.UUID, offset: int, limit: int
) -> DeliveryPage:
    total, rows = await WebhookRepository(session).deliveries(org_id, offset, limit)
    return DeliveryPage(items=[DeliveryRead.model_validate(r) for r in rows], total=total)
