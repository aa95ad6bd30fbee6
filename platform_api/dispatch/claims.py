"""Claiming a client message for dispatch, exactly once across replicas and restarts.

A dispatch is a `MessageDispatch` row keyed by the message id. A dispatcher claims a
message by inserting that row (`state: claimed`, its own id in `claimed_by`, a lease
until `lease_until`): the primary key lets one insert win, every other replica's fails.
A claim whose holder died (its lease ran out, the row still `claimed`) is taken over by
a conditional update that only one replica's statement matches. The outcome is written
by `finish`, again conditionally (still `claimed`, still by this holder): a holder that
lost its claim to a takeover writes nothing, so one message never gets two outcomes.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import and_, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from platform_api.models import Conversation, Message, MessageDispatch

CLAIMED = "claimed"
PLANNED = "planned"
DRAFTED = "drafted"
FAILED = "failed"


@dataclass(frozen=True)
class Claim:
    """A message this dispatcher holds: its id, org, conversation and attempt number."""

    message_id: int
    org_id: uuid.UUID
    conversation_id: uuid.UUID
    attempt: int


def _now() -> datetime:
    return datetime.now(UTC)


async def due(session: AsyncSession, limit: int) -> list[tuple[int, uuid.UUID, uuid.UUID]]:
    """Client messages with no dispatch yet, or whose claim's lease ran out: (message,
    org, conversation), oldest first."""
    rows = await session.execute(
        select(Message.id, Conversation.org_id, Message.conversation_id)
        .join(Conversation, Conversation.id == Message.conversation_id)
        .outerjoin(MessageDispatch, MessageDispatch.message_id == Message.id)
        .where(
            Message.role == "customer",
            Message.author_user_id.is_not(None),
            or_(
                MessageDispatch.message_id.is_(None),
                and_(MessageDispatch.state == CLAIMED, MessageDispatch.lease_until < _now()),
            ),
        )
        .order_by(Message.id)
        .limit(limit)
    )
    return [(int(m), o, c) for m, o, c in rows.all()]


async def claim(
    sessions: async_sessionmaker[AsyncSession],
    found: tuple[int, uuid.UUID, uuid.UUID],
    holder: str,
    lease: float,
) -> Claim | None:
    """Claim the message for `holder` for `lease` seconds: a new claim by insert, a dead
    holder's by takeover; None when another dispatcher holds or finished it."""
    message_id, org_id, conversation_id = found
    until = _now() + timedelta(seconds=lease)
    try:
        async with sessions() as session, session.begin():
            session.add(
                MessageDispatch(
                    message_id=message_id,
                    org_id=org_id,
                    conversation_id=conversation_id,
                    state=CLAIMED,
                    attempts=1,
                    claimed_by=holder,
                    lease_until=until,
                    created_at=_now(),
                    updated_at=_now(),
                )
            )
        return Claim(message_id, org_id, conversation_id, 1)
    except IntegrityError:
        pass  # a row exists: take it over if its lease ran out
    async with sessions() as session, session.begin():
        result = await session.execute(
            update(MessageDispatch)
            .where(
                MessageDispatch.message_id == message_id,
                MessageDispatch.state == CLAIMED,
                MessageDispatch.lease_until < _now(),
            )
            .values(
                claimed_by=holder,
                lease_until=until,
                attempts=MessageDispatch.attempts + 1,
                updated_at=_now(),
            )
            .returning(MessageDispatch.attempts)
        )
        attempt = result.scalar_one_or_none()
    if attempt is None:
        return None
    return Claim(message_id, org_id, conversation_id, int(attempt))


async def finish(
    session: AsyncSession,
    claim_: Claim,
    holder: str,
    state: str,
    **outcome: object,
) -> bool:
    """Record the dispatch's outcome in the caller's transaction, when `holder` still
    holds the claim; False (and nothing written) when it lost it."""
    result = await session.execute(
        update(MessageDispatch)
        .where(
            MessageDispatch.message_id == claim_.message_id,
            MessageDispatch.state == CLAIMED,
            MessageDispatch.claimed_by == holder,
        )
        .values(state=state, lease_until=None, updated_at=_now(), **outcome)
        .returning(MessageDispatch.message_id)
    )
    return result.scalar_one_or_none() is not None
