"""Draft replies waiting for an expert, as items of the review queue (kind
`reply`).

The queue lists the open step decisions first (deadline first, from the watch-fed index)
and then the waiting drafts, oldest first, read from the `reply_drafts` table; both
orders are total and stable, so pages do not overlap. A reply item has the queue item's
shape: `id` `replies/<draft id>`, `task_id` `conversations/<conversation id>`, `run_id`
the draft's id, `workflow` the drafting agent, `summary` the client message,
`step_id` `reply`, `step_description` the draft (both redacted, as the thread is),
`kind` `reply`, `risk` the draft's, no deadline. `GET /human-tasks/replies/{id}` shows
it with its thread.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection
from datetime import datetime

from sqlalchemy import ColumnElement, and_, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.human_tasks.redact import redact
from platform_api.human_tasks.schemas import HumanTask
from platform_api.models import ReplyDraft

SUMMARY = 300


def _waiting(org_ids: Collection[uuid.UUID]) -> ColumnElement[bool]:
    return and_(ReplyDraft.org_id.in_(list(org_ids)), ReplyDraft.state == "pending")


async def count(session: AsyncSession, org_ids: Collection[uuid.UUID]) -> int:
    """How many drafts of `org_ids` wait for an expert."""
    if not org_ids:
        return 0
    found = await session.scalar(
        select(func.count()).select_from(ReplyDraft).where(_waiting(org_ids))
    )
    return int(found or 0)


def item(draft: ReplyDraft, now: datetime) -> HumanTask:
    """A waiting draft as a queue item."""
    return HumanTask(
        id=f"replies/{draft.id}",
        task_id=f"conversations/{draft.conversation_id}",
        run_id=str(draft.id),
        org_id=draft.org_id,
        workflow=draft.agent,
        summary=redact(draft.client_message)[0][:SUMMARY],
        requested_by=draft.requested_by,
        step_id="reply",
        step_description=redact(draft.draft)[0][:SUMMARY],
        kind="reply",
        tool=None,
        risk=draft.risk,
        status="pending",
        deadline=None,
        escalations=0,
        near_deadline=False,
        age_seconds=max(0, int((now - draft.created_at).total_seconds())),
    )


async def page_json(
    session: AsyncSession,
    org_ids: Collection[uuid.UUID],
    now: datetime,
    *,
    offset: int,
    limit: int,
) -> list[bytes]:
    """The JSON of the waiting drafts `offset` to `offset + limit`, oldest first."""
    if not org_ids or limit <= 0:
        return []
    rows = await session.execute(
        select(ReplyDraft)
        .where(_waiting(org_ids))
        .order_by(ReplyDraft.created_at, ReplyDraft.id)
        .offset(offset)
        .limit(limit)
    )
    return [item(d, now).model_dump_json().encode() for d in rows.scalars()]
