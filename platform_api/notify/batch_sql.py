"""The notifier's batch on PostgreSQL in one statement, which commits on its own.

What `emit_many` and `progress.tell` do for a batch of the watch's events in a
transaction (BEGIN, the org's webhook read, the event log's insert, each delivery's and
each conversation message's insert, COMMIT: four round trips and more) is here one
statement sent to the driver on a connection that autocommits (`db.autocommitting`): its
data-modifying CTEs log each event unless it is logged already (`ON CONFLICT DO
NOTHING`), queue a delivery for each new event that its org's webhook asks for (the
webhook read in the statement, so a change of it on another replica is seen as before),
and append each new event's system message to its task's conversation (only the org's
own). One statement is one transaction: the events, their deliveries and their messages
land together or not at all, and an event seen again adds nothing.

`rows_of` is pure (what the statement is given); `record` sends it and wakes this
replica's streams and deliverer when something was logged.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from platform_api.notify import events, progress
from platform_api.notify.delivery import envelope
from platform_api.notify.wakeup import QUEUED, WAKEUP

RECORD_SQL = """
WITH given AS (
    SELECT * FROM unnest(
        $1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[],
        $6::uuid[], $7::text[], $8::text[]
    ) WITH ORDINALITY AS g(org_id, event_id, event, payload, body, conversation_id,
                           message, meta, n)
), logged AS (
    INSERT INTO notify_events (org_id, event_id, event, payload, created_at)
    SELECT org_id, event_id, event, payload::json, $9 FROM given ORDER BY n
    ON CONFLICT (org_id, event_id) DO NOTHING
    RETURNING org_id, event_id
), new AS (
    SELECT given.* FROM given JOIN logged USING (org_id, event_id)
), queued AS (
    INSERT INTO webhook_deliveries (id, org_id, event_id, event, body, url, state,
        attempt_count, attempts, next_attempt_at, created_at)
    SELECT gen_random_uuid(), new.org_id, new.event_id, new.event, new.body, w.url,
        'pending', 0, '[]'::json, $9, $9
    FROM new JOIN webhooks w ON w.org_id = new.org_id
    WHERE w.events::jsonb ? new.event
    ON CONFLICT (org_id, event_id) DO NOTHING
    RETURNING 1
), told AS (
    INSERT INTO messages (conversation_id, role, author, content, created_at, internal, meta)
    SELECT new.conversation_id, 'system', 'platform', new.message, $9, false, new.meta::json
    FROM new JOIN conversations c ON c.id = new.conversation_id AND c.org_id = new.org_id
    WHERE new.message IS NOT NULL
    ORDER BY new.n
    RETURNING 1
)
SELECT new.org_id, new.event_id, (SELECT count(*) FROM queued) AS queued,
    (SELECT count(*) FROM told) AS told
FROM new
"""
"""$1 to $8: one array per column of the events (org, id, name, payload, the webhook's
body, the conversation, its message and the message's meta; NULL where there is none);
$9: the time they are logged at."""

Told = tuple[uuid.UUID, events.Event, dict[str, Any]]
"""An event of the batch: its org, the event, and its payload as logged (with its id)."""


@dataclass(frozen=True, slots=True)
class Recorded:
    """What the statement did: the (org, event id) of the events it logged, and how many
    deliveries and messages it added."""

    new: set[tuple[uuid.UUID, str]]
    queued: int
    told: int


def rows_of(told: list[Told], now: datetime) -> list[list[Any]]:
    """The statement's eight arrays for `told` (an event id twice: its first only)."""
    columns: list[list[Any]] = [[] for _ in range(8)]
    seen: set[tuple[uuid.UUID, str]] = set()
    for org_id, event, payload in told:
        data = dict(payload)
        event_id = str(data.pop("event_id", None) or uuid.uuid4())
        if (org_id, event_id) in seen:
            continue
        seen.add((org_id, event_id))
        conversation, message, meta = _message(event)
        values = (
            org_id,
            event_id,
            event.event,
            json.dumps(data),
            envelope(org_id, event_id, event.event, data, now),
            conversation,
            message,
            meta,
        )
        for column, value in zip(columns, values, strict=True):
            column.append(value)
    return columns


def _message(event: events.Event) -> tuple[uuid.UUID | None, str | None, str | None]:
    """The conversation, text and meta (JSON) of the event's system message, or Nones
    (`progress.tell`'s choice)."""
    conversation = event.payload.get("conversation_id")
    found = progress.message_for(event) if conversation else None
    if found is None:
        return None, None, None
    try:
        cid = uuid.UUID(str(conversation))
    except ValueError:
        return None, None, None
    text, meta = found
    return cid, text, json.dumps(meta)


async def record(driver: Any, told: list[Told], now: datetime) -> Recorded:
    """Log `told` in one statement on `driver` (an asyncpg connection that autocommits);
    this replica's streams and deliverer woken when it logged or queued anything."""
    if not told:  # every batch of an org unknown here: nothing to send
        return Recorded(set(), 0, 0)
    found = await driver.fetch(RECORD_SQL, *rows_of(told, now), now)
    new = {(row["org_id"], row["event_id"]) for row in found}
    queued = int(found[0]["queued"]) if found else 0
    told_count = int(found[0]["told"]) if found else 0
    if queued:
        QUEUED.notify()
    if new:
        WAKEUP.notify()
    return Recorded(new, queued, told_count)
