"""`emit`: the one entry point every part of the platform calls to notify.

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
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.notify.emitter import record


async def emit(
    session: AsyncSession, org_id: uuid.UUID, event: str, payload: dict[str, Any]
) -> None:
    """Notify `event` of `org_id` (see the module docstring)."""
    await record(session, org_id, event, payload)
