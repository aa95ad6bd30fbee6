"""What the tool proxy enforces of an org's tool config before any upstream call (the
config itself: `platform_api.tools.config`):

- `check_action`: an action the config does not allow answers 403 `tool_action_not_allowed`;
- `take`: one call of the org's hourly allowance of the tool, counted in `tool_call_counts`
  by one upsert that increments only below the limit (so two replicas cannot both take the
  last call); beyond it, 429 `tool_rate_limited` with `Retry-After` (seconds to the next
  clock hour). Every call the proxy accepts counts, replays of a stored answer included.
"""

from __future__ import annotations

import math
import uuid
from datetime import datetime, timedelta

from sqlalchemy import delete
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.errors import ToolActionNotAllowed, ToolRateLimited
from platform_api.models import ToolCallCount
from platform_api.tools.config import ToolConfig

KEEP_WINDOWS = timedelta(hours=2)
"""Counts older than this are deleted as new ones are taken."""


def check_action(config: ToolConfig, tool: str, action: str) -> None:
    """ToolActionNotAllowed unless the org's config lets its agents call `action`."""
    if not config.allows_action(action):
        raise ToolActionNotAllowed(
            f"the org's config of {tool!r} does not allow {action!r}",
            tool=tool,
            action=action,
            allowedActions=",".join(config.allowed_actions or ()),
        )


def window_of(now: datetime) -> datetime:
    """The start of the clock hour `now` is in."""
    return now.replace(minute=0, second=0, microsecond=0)


async def take(
    session: AsyncSession, org_id: uuid.UUID, tool: str, limit: int, now: datetime
) -> int:
    """Count one call of the org's `limit` per hour of `tool`; the count after it, or
    ToolRateLimited when the hour's allowance is spent."""
    window = window_of(now)
    dialect = session.bind.dialect.name if session.bind else "postgresql"
    insert = pg_insert if dialect == "postgresql" else sqlite_insert
    statement = (
        insert(ToolCallCount)
        .values(org_id=org_id, tool=tool, window_start=window, count=1)
        .on_conflict_do_update(
            index_elements=["org_id", "tool", "window_start"],
            set_={"count": ToolCallCount.count + 1},
            where=ToolCallCount.count < limit,
        )
        .returning(ToolCallCount.count)
    )
    counted = (await session.execute(statement)).scalar_one_or_none()
    await session.execute(
        delete(ToolCallCount).where(
            ToolCallCount.org_id == org_id,
            ToolCallCount.tool == tool,
            ToolCallCount.window_start < window - KEEP_WINDOWS,
        )
    )
    if counted is None:
        wait = math.ceil((window + timedelta(hours=1) - now).total_seconds())
        raise ToolRateLimited(
            f"the org's agents made {limit} calls to {tool!r} this hour, its ratePerHour",
            tool=tool,
            limit=str(limit),
            retryAfterSeconds=str(max(1, wait)),
        )
    return int(counted)
