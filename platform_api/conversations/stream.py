"""The live stream of one conversation (server-sent events), served by the event stream's
loop (`notify.stream.serve`: woken at once by a commit on this replica, a look every
`notify_interval_seconds` otherwise, heartbeats, a session per look, never held).

Events: `message` (a `MessageView`; `id:` is the message id, sent back as `Last-Event-ID`
to resume) and `task` (the client's view of a task of the conversation, whenever it
changed; every task once when the stream opens). Each look first checks the caller again,
as the event stream does: a deactivated user, a removed membership, a role that no longer
reads conversations, or a conversation it no longer sees (no longer shared) ends the
stream. Internal notes are sent only to callers with `tasks.read` in the org.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from platform_api.bounds import event_cursor
from platform_api.conversations.repository import ConversationRepository, Visibility
from platform_api.conversations.schemas import MessageView
from platform_api.conversations.service import (
    PARTICIPATE,
    READ_ALL,
    archived_tasks,
    live_tasks,
    task_views,
)
from platform_api.conversations.taskview import ClientTask
from platform_api.floor.accounts import UserRepository
from platform_api.kube.client import KubeClient, KubeError
from platform_api.models import Org
from platform_api.settings import Settings

BATCH = 200


def message_frame(message: MessageView) -> bytes:
    return f"id: {message.id}\nevent: message\ndata: {message.model_dump_json()}\n\n".encode()


def task_frame(task: ClientTask) -> bytes:
    return f"event: task\ndata: {task.model_dump_json()}\n\n".encode()


class ConversationStream:
    """One caller's stream of one conversation (see the module docstring)."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        settings: Settings,
        kube: KubeClient | None,
        view: Visibility,
        conversation_id: uuid.UUID,
    ) -> None:
        self._sessions = sessions
        self._kube = kube
        self._org, self._user = view.org_id, view.user_id
        self._cid = conversation_id
        self.interval = settings.notify_interval_seconds
        self.heartbeat = settings.events_heartbeat_seconds
        self._seen: dict[str, str] = {}
        self._tasks_at = 0.0

    async def start(self, last_event_id: str | None) -> int:
        """The cursor: `Last-Event-ID` when it is a message id, else the newest now."""
        cursor = event_cursor(last_event_id)
        if cursor is not None:
            return cursor
        async with self._sessions() as session:
            return await ConversationRepository(session).last_message_id(self._cid)

    async def _view(self, session: AsyncSession) -> Visibility | None:
        """What the caller may see now (None: nothing any more)."""
        users = UserRepository(session)
        full = self._org in await users.orgs_holding(self._user, READ_ALL)
        if not full and self._org not in await users.orgs_holding(self._user, PARTICIPATE):
            return None
        repo = ConversationRepository(session)
        shared = not full and await repo.shares(self._org)
        view = Visibility(self._org, self._user, full, shared)
        if await repo.visible(view, self._cid) is None:
            return None
        return view

    async def look(self, cursor: int) -> tuple[list[bytes], int] | None:
        """The new messages' and changed tasks' frames and the new cursor; None once the
        caller may not see the conversation any more."""
        async with self._sessions() as session:
            view = await self._view(session)
            if view is None:
                return None
            found = await ConversationRepository(session).messages_after(
                view, self._cid, cursor, BATCH
            )
            frames = [message_frame(MessageView.of(m)) for m in found]
            frames += await self._task_frames(session)
        return frames, found[-1].id if found else cursor

    async def _task_frames(self, session: AsyncSession) -> list[bytes]:
        """The tasks that changed since the last look (at most one look per interval)."""
        if time.monotonic() - self._tasks_at < self.interval and self._tasks_at:
            return []
        self._tasks_at = time.monotonic()
        org = await session.get(Org, self._org)
        if org is None:
            return []
        live = []
        if self._kube is not None:
            try:
                live = await live_tasks(self._kube, org, self._cid)
            except KubeError:
                return []  # the API server is away: the next look tries again
        uids = {t.metadata.uid or "" for t in live}
        stored = await archived_tasks(session, org.id, self._cid, uids)
        frames = []
        for view in task_views(live + stored, datetime.now(UTC)):
            digest = hashlib.sha256(view.model_dump_json().encode()).hexdigest()
            if self._seen.get(view.uid) != digest:
                self._seen[view.uid] = digest
                frames.append(task_frame(view))
        return frames
