"""The seam through which the platform tells the world that something happened (issue 14,
item 3: webhooks and the `/human-tasks/events` stream).

`emit` is called inside the caller's transaction when a reply is sent or waits for review
(`reply.needs_review`, `reply.sent`, `reply.rejected`). This module is a no-op stub; the
notifications branch replaces it with the real delivery.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession


async def emit(
    session: AsyncSession, org_id: uuid.UUID, event: str, payload: dict[str, Any]
) -> None:
    """Announce `event` of `org_id` with `payload` (nothing yet: a stub)."""
    del session, org_id, event, payload
