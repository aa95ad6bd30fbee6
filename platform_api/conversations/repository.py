"""Database access of conversations and messages; reads are scoped to given orgs."""

from __future__ import annotations

import uuid
from collections.abc import Collection

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.errors import Conflict
from platform_api.models import Conversation, Message


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
