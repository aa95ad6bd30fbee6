"""Delivering an org's events to its webhook: signed, retried with exponential backoff,
every attempt recorded.

The body is a JSON envelope (`envelope`) with the event's stable `id`, so a receiver drops
a duplicate (a delivery is at least once: an answer lost after the receiver took the event
makes the platform send it again). The request carries `X-Humanwork-Signature:
t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>" under the webhook's secret>` (the scheme of
the agent events, `humanwork_core.signing`), `X-Humanwork-Event`, and the id again as
`Idempotency-Key`. Any 2xx answer delivers; anything else (or no answer) is retried after
`webhook_backoff_seconds * 2**(attempt - 1)` (at most an hour) until
`webhook_max_attempts`, then the delivery is `failed`.

Deliveries are claimed in a short transaction (`SELECT ... FOR UPDATE SKIP LOCKED`, their
next attempt moved past a lease), then sent outside it: several replicas never send the
same attempt at once. The connection goes through the platform's egress client (the
upstreams' checks at connect time), so a webhook whose name now resolves to an internal
address is refused before a packet is sent.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from humanwork_core import signing
from platform_api.integrations.crypto import CredentialCipher, Sealed
from platform_api.models import Webhook, WebhookDelivery
from platform_api.notify.repository import WebhookRepository
from platform_api.notify.wakeup import utcnow

log = logging.getLogger(__name__)

EVENT_HEADER = "X-Humanwork-Event"
EVENT_ID_HEADER = "X-Humanwork-Event-Id"
SECRET_PURPOSE = "webhook"
MAX_BACKOFF = timedelta(hours=1)
BATCH = 20


def envelope(
    org_id: uuid.UUID, event_id: str, event: str, data: dict[str, Any], at: datetime
) -> str:
    """The JSON body a webhook receives (and the live stream's `data`)."""
    return json.dumps(
        {
            "id": event_id,
            "event": event,
            "org_id": str(org_id),
            "occurred_at": at.isoformat(),
            "data": data,
        },
        separators=(",", ":"),
        sort_keys=True,
    )


def seal_secret(cipher: CredentialCipher | None, org_id: uuid.UUID, secret: str) -> Sealed:
    """The webhook secret as stored: sealed when a credentials key is configured."""
    if cipher is None:
        return Sealed("", b"", secret.encode())
    return cipher.seal(org_id, SECRET_PURPOSE, secret.encode())


def open_secret(cipher: CredentialCipher | None, hook: Webhook) -> str:
    """The webhook's secret in clear, to sign with."""
    if not hook.key_id:
        return hook.secret.decode()
    if cipher is None:
        raise RuntimeError("the webhook secret is sealed but no credentials key is configured")
    sealed = Sealed(hook.key_id, hook.nonce or b"", hook.secret)
    return cipher.open(hook.org_id, SECRET_PURPOSE, sealed).decode()


def backoff(base: float, attempt: int) -> timedelta:
    """The wait after failed attempt number `attempt` (1 first)."""
    return min(MAX_BACKOFF, timedelta(seconds=base * 2 ** (attempt - 1)))


@dataclass
class Deliverer:
    """Sends due deliveries (`run_once`), with the platform's egress client."""

    sessions: async_sessionmaker[AsyncSession]
    client: httpx.AsyncClient
    cipher: CredentialCipher | None
    max_attempts: int
    backoff_seconds: float
    timeout: float
    on_attempt: Callable[[str], None] | None = None
    """Told each attempt's outcome: `delivered`, `retry` or `failed` (the metrics)."""

    async def run_once(self) -> int:
        """Claim the deliveries due now and attempt each; how many were attempted."""
        now = utcnow()
        lease = timedelta(seconds=self.timeout + 30)
        async with self.sessions() as session, session.begin():
            claimed = [d.id for d in await WebhookRepository(session).claim(now, lease, BATCH)]
        for delivery_id in claimed:
            await self._attempt(delivery_id)
        return len(claimed)

    async def _attempt(self, delivery_id: uuid.UUID) -> None:
        async with self.sessions() as session:
            repo = WebhookRepository(session)
            delivery = await repo.delivery(delivery_id)
            hook = await repo.get(delivery.org_id) if delivery is not None else None
            target = (hook.url, open_secret(self.cipher, hook)) if hook is not None else None
        if delivery is None:
            return
        if target is None:
            outcome: dict[str, Any] = {"error": "the org has no webhook any more"}
            give_up = True
        else:
            outcome = await self._send(delivery, *target)
            give_up = False
        async with self.sessions() as session, session.begin():
            current = await WebhookRepository(session).delivery(delivery_id)
            if current is not None:
                self._record(current, outcome, give_up)

    async def _send(self, delivery: WebhookDelivery, url: str, secret: str) -> dict[str, Any]:
        now = utcnow()
        headers = {
            "Content-Type": "application/json",
            signing.SIGNATURE_HEADER: signing.sign(secret, delivery.body, now),
            EVENT_HEADER: delivery.event,
            EVENT_ID_HEADER: delivery.event_id,
            signing.IDEMPOTENCY_HEADER: delivery.event_id,
        }
        outcome: dict[str, Any] = {"at": now.isoformat(), "url": url}
        try:
            answer = await self.client.post(
                url, content=delivery.body.encode(), headers=headers, timeout=self.timeout
            )
        except httpx.HTTPError as exc:
            log.info("webhook delivery %s: %s", delivery.event_id, type(exc).__name__)
            return {**outcome, "error": type(exc).__name__}
        return {**outcome, "status": answer.status_code}

    def _record(self, delivery: WebhookDelivery, outcome: dict[str, Any], give_up: bool) -> None:
        now = utcnow()
        delivery.attempt_count += 1
        delivery.attempts = [
            *delivery.attempts,
            {"attempt": delivery.attempt_count, "at": now.isoformat(), **outcome},
        ]
        status = outcome.get("status")
        if isinstance(status, int) and 200 <= status < 300:
            delivery.state = "delivered"
            delivery.delivered_at = now
        elif give_up or delivery.attempt_count >= self.max_attempts:
            delivery.state = "failed"
        else:
            delivery.next_attempt_at = now + backoff(self.backoff_seconds, delivery.attempt_count)
        if self.on_attempt is not None:
            self.on_attempt(delivery.state if delivery.state != "pending" else "retry")
