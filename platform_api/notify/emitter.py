"""Recording an event: logged once per org and event id, its webhook delivery queued,
this replica's streams and deliverer woken at commit (`notify_hooks.emit` is the entry
point the rest of the platform calls; see its docstring)."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.models import Webhook
from platform_api.notify.delivery import envelope
from platform_api.notify.repository import EventRepository, WebhookRepository
from platform_api.notify.wakeup import WAKEUP, utcnow


async def record(
    session: AsyncSession, org_id: uuid.UUID, event: str, payload: dict[str, Any]
) -> bool:
    """Log and queue the event in the caller's transaction; whether it was new (False:
    logged already). `payload["event_id"]`, taken out, is its stable id (random without)."""
    data = dict(payload)
    event_id = str(data.pop("event_id", None) or uuid.uuid4())
    now = utcnow()
    if not await EventRepository(session).add(org_id, event_id, event, data, now):
        return False
    hook = await _hook_of(session, org_id)
    if hook is not None and event in hook.events:
        body = envelope(org_id, event_id, event, data, now)
        await WebhookRepository(session).enqueue(org_id, event_id, event, body, hook.url, now)
    WAKEUP.after_commit(session)
    return True


_HOOKS = "humanwork_webhooks"


async def _hook_of(session: AsyncSession, org_id: uuid.UUID) -> Webhook | None:
    """The org's webhook, read once per session (the notifier records many events of an
    org in one transaction; an org without a webhook would be asked again for each)."""
    known: dict[uuid.UUID, Webhook | None] = session.info.setdefault(_HOOKS, {})
    if org_id not in known:
        known[org_id] = await WebhookRepository(session).get(org_id)
    return known[org_id]
