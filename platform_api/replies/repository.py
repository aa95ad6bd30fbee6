"""Database access of reply drafts; reads are scoped to given orgs."""

from __future__ import annotations

import uuid
from collections.abc import Collection

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.models import ReplyDraft


class ReplyRepository:
    """Reads and writes reply drafts."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add(self, draft: ReplyDraft) -> ReplyDraft:
        self.session.add(draft)
        await self.session.flush()
        return draft

    async def get_in(
        self, reply_id: uuid.UUID, org_ids: Collection[uuid.UUID], *, lock: bool = False
    ) -> ReplyDraft | None:
        """The draft, if it is of one of `org_ids`; with `lock`, held until the transaction
        ends (two experts deciding it at once are decided one after the other)."""
        query = select(ReplyDraft).where(ReplyDraft.id == reply_id)
        if lock:
            query = query.with_for_update()
        found = (await self.session.execute(query)).scalars().first()
        if found is None or found.org_id not in org_ids:
            return None
        return found
