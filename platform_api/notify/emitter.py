"""`emit`: the one way every part of the platform notifies (the task watch, replies and the
dispatcher alike).

`emit(session, org_id, event, payload)` logs the event in the org's event log (which the
live stream `GET /human-tasks/events` reads) and, when the org has a webhook that asks for
this event, queues its delivery; both in the caller's transaction, so nothing is told
about a change that rolled back. When the transaction commits, the streams and the
deliverer of this replica are woken (the other replicas find it at their next look).

An event is kept once per org and event id: `payload["event_id"]` (taken out of the
payload) names it when the caller has a stable id (the same state seen twice, by two
replicas, or again after a restart, must notify once); without one a random id is used.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.models import Webhook
from platform_api.notify.delivery import envelope
from platform_api.notify.repository import EventRepository, WebhookRepository
from platform_api.notify.wakeup import QUEUED, WAKEUP, utcnow


async def emit(
    session: AsyncSession, org_id: uuid.UUID, event: str, payload: dict[str, Any]
) -> bool:
    """Notify `event` of `org_id` in the caller's transaction (see the module docstring);
    whether it was new (False: logged already)."""
    data = dict(payload)
    event_id = str(data.pop("event_id", None) or uuid.uuid4())
    now = utcnow()
    if not await EventRepository(session).add(org_id, event_id, event, data, now):
        return False
    await _logged(session, org_id, event_id, event, data, now)
    return True


async def emit_many(
    session: AsyncSession, events: list[tuple[uuid.UUID, str, dict[str, Any]]]
) -> list[bool]:
    """`emit` of each (org, event, payload) of `events`, their log in one statement (the
    watch's notifier records what queued while it wrote, many tasks' events at once);
    whether each was new (an event id twice in `events` is new once, the first time)."""
    now = utcnow()
    told: list[tuple[uuid.UUID, str, str, dict[str, Any]]] = []
    for org_id, event, payload in events:
        data = dict(payload)
        told.append((org_id, str(data.pop("event_id", None) or uuid.uuid4()), event, data))
    rows = [
        {"org_id": o, "event_id": i, "event": e, "payload": d, "created_at": now}
        for o, i, e, d in told
    ]
    fresh = await EventRepository(session).add_many(rows)
    out = []
    for org_id, event_id, event, data in told:
        new = (org_id, event_id) in fresh
        fresh.discard((org_id, event_id))
        if new:
            await _logged(session, org_id, event_id, event, data, now)
        out.append(new)
    return out


async def _logged(
    session: AsyncSession,
    org_id: uuid.UUID,
    event_id: str,
    event: str,
    data: dict[str, Any],
    now: datetime,
) -> None:
    """What follows a newly logged event in its transaction: its webhook delivery queued
    (when the org's webhook asks for it), the wake-ups after the commit."""
    hook = await _hook_of(session, org_id)
    if hook is not None and event in hook.events:
        body = envelope(org_id, event_id, event, data, now)
        await WebhookRepository(session).enqueue(org_id, event_id, event, body, hook.url, now)
        QUEUED.after_commit(session)
    WAKEUP.after_commit(session)


_HOOKS = "humanwork_webhooks"


async def _hook_of(session: AsyncSession, org_id: uuid.UUID) -> Webhook | None:
    """The org's webhook, read once per session (the notifier records many events of an
    org in one transaction; an org without a webhook would be asked again for each)."""
    known: dict[uuid.UUID, Webhook | None] = session.info.setdefault(_HOOKS, {})
    if org_id not in known:
        known[org_id] = await WebhookRepository(session).get(org_id)
    return known[org_id]
