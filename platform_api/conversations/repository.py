"""Database access of conversations, their participants and messages; reads are scoped to
given orgs, and a client's reads to the conversations it may see (`Visibility`)."""

from __future__ import annotations

import uuid
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, Subquery, and_, func, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.errors import Conflict
from platform_api.models import Conversation, ConversationParticipant, Message, Org


@dataclass(frozen=True)
class Visibility:
    """What one caller sees of one org's conversations: every one and every message
    (`full`: an expert, an admin), or only those it takes part in (`participant`, a
    client; all of the org's when the org shares them), never internal notes."""

    org_id: uuid.UUID
    user_id: uuid.UUID
    full: bool
    shared: bool = False

    @property
    def internal(self) -> bool:
        """Whether internal notes are shown."""
        return self.full


class ConversationRepository:
    """Reads and writes conversations and their messages."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add(self, conversation: Conversation) -> Conversation:
        self.session.add(conversation)
        try:
            await self.session.flush()
        except IntegrityError:
            raise Conflict("a conversation with this id exists", id=str(conversation.id)) from None
        return conversation

    async def get_in(
        self, conversation_id: uuid.UUID, org_ids: Collection[uuid.UUID]
    ) -> Conversation | None:
        found = await self.session.get(Conversation, conversation_id)
        if found is None or found.org_id not in org_ids:
            return None
        return found

    async def add_message(self, message: Message) -> Message:
        self.session.add(message)
        await self.session.flush()
        return message

    async def messages(self, conversation_id: uuid.UUID, limit: int) -> list[Message]:
        """The last `limit` messages of the conversation, oldest first."""
        rows = await self.session.execute(
            select(Message)
            .where(Message.conversation_id == conversation_id)
            .order_by(Message.created_at.desc(), Message.id.desc())
            .limit(limit)
        )
        return list(reversed(list(rows.scalars())))

    # --- the client's side ----------------------------------------------------------------

    async def shares(self, org_id: uuid.UUID) -> bool:
        """Whether the org's clients see each other's conversations."""
        org = await self.session.get(Org, org_id)
        return bool(org is not None and org.clients_share_conversations)

    async def take_part(self, conversation_id: uuid.UUID, user_id: uuid.UUID) -> None:
        """Make the user a participant (idempotent)."""
        known = await self.session.get(ConversationParticipant, (conversation_id, user_id))
        if known is None:
            self.session.add(
                ConversationParticipant(conversation_id=conversation_id, user_id=user_id)
            )
            await self.session.flush()

    async def takes_part(self, conversation_id: uuid.UUID, user_id: uuid.UUID) -> bool:
        found = await self.session.get(ConversationParticipant, (conversation_id, user_id))
        return found is not None

    def _visible(self, view: Visibility) -> list[ColumnElement[bool]]:
        where: list[ColumnElement[bool]] = [Conversation.org_id == view.org_id]
        if not view.full and not view.shared:
            mine = select(ConversationParticipant.conversation_id).where(
                ConversationParticipant.user_id == view.user_id
            )
            where.append(Conversation.id.in_(mine))
        return where

    def _last(self, view: Visibility) -> tuple[Subquery, ColumnElement[datetime]]:
        """The newest visible message per conversation (a subquery) and the activity
        column (that, or the conversation's creation)."""
        shown = [] if view.internal else [Message.internal.is_(False)]
        last = (
            select(Message.conversation_id, func.max(Message.created_at).label("last"))
            .where(*shown)
            .group_by(Message.conversation_id)
            .subquery()
        )
        activity: ColumnElement[datetime] = func.coalesce(last.c.last, Conversation.created_at)
        return last, activity

    async def visible(self, view: Visibility, conversation_id: uuid.UUID) -> Conversation | None:
        """The conversation when the caller may see it (None otherwise)."""
        found = await self.session.execute(
            select(Conversation).where(Conversation.id == conversation_id, *self._visible(view))
        )
        return found.scalars().first()

    async def page(
        self,
        view: Visibility,
        limit: int,
        before: tuple[datetime, uuid.UUID] | None,
    ) -> list[tuple[Conversation, datetime | None]]:
        """Up to `limit` visible conversations, newest activity first, after the cursor
        `before` (the activity and id of the last one of the previous page); each with the
        time of its newest visible message."""
        last, activity = self._last(view)
        query = (
            select(Conversation, last.c.last)
            .outerjoin(last, last.c.conversation_id == Conversation.id)
            .where(*self._visible(view))
            .order_by(activity.desc(), Conversation.id.desc())
            .limit(limit)
        )
        if before is not None:
            at, cid = before
            query = query.where(or_(activity < at, and_(activity == at, Conversation.id < cid)))
        rows = await self.session.execute(query)
        return [(row[0], row[1]) for row in rows]

    async def last_message_at(
        self, view: Visibility, conversation_id: uuid.UUID
    ) -> datetime | None:
        shown = [] if view.internal else [Message.internal.is_(False)]
        return await self.session.scalar(
            select(func.max(Message.created_at)).where(
                Message.conversation_id == conversation_id, *shown
            )
        )

    async def messages_after(
        self, view: Visibility, conversation_id: uuid.UUID, after: int, limit: int
    ) -> list[Message]:
        """Up to `limit` visible messages with an id above `after`, oldest first."""
        shown = [] if view.internal else [Message.internal.is_(False)]
        rows = await self.session.execute(
            select(Message)
            .where(Message.conversation_id == conversation_id, Message.id > after, *shown)
            .order_by(Message.id)
            .limit(limit)
        )
        return list(rows.scalars())

    async def last_message_id(self, conversation_id: uuid.UUID) -> int:
        found = await self.session.scalar(
            select(func.max(Message.id)).where(Message.conversation_id == conversation_id)
        )
        return int(found or 0)
