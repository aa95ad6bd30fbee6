"""Conversation use cases on both sides: list and read the conversations a caller may see
(an expert or admin every one of its org, a client those it takes part in, or all of its
org's when the org shares them), start one, a client's message, an expert's internal
note, and the tasks started from a conversation.

What is not visible answers 404 (never 403), so a conversation's existence does not leak.
Internal notes never reach a caller without `tasks.read`. Nothing a client sends chooses
a message's role, author or meta: the platform writes them from the caller's identity.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from humanwork_core.resources import AgenticTask
from platform_api.archive.repository import task_of
from platform_api.conversations.repository import ConversationRepository, Visibility
from platform_api.conversations.schemas import (
    ConversationCreate,
    ConversationPage,
    ConversationRead,
    ConversationThread,
    MessageView,
)
from platform_api.conversations.taskview import ClientTask, ClientTasks, client_task
from platform_api.deactivation.repository import ensure_active
from platform_api.errors import NotFound, ValidationFailed
from platform_api.floor.audit.service import record
from platform_api.floor.principal import OrgScope
from platform_api.kube.client import KubeClient
from platform_api.models import ArchivedTask, Conversation, Message, Org
from platform_api.notify.wakeup import WAKEUP

READ_ALL = "tasks.read"
"""Every conversation of the org and its internal notes (experts, admins)."""
PARTICIPATE = "conversations.participate"
"""The conversations the caller takes part in (clients)."""
MANAGE = "agents.manage"


def _now() -> datetime:
    return datetime.now(UTC)


async def visibility(session: AsyncSession, scope: OrgScope) -> Visibility:
    """What the caller sees of the org's conversations."""
    principal = scope.principal
    full = principal.can_in(scope.org_id, READ_ALL)
    shared = not full and await ConversationRepository(session).shares(scope.org_id)
    return Visibility(scope.org_id, principal.user_id, full, shared)


async def visible(session: AsyncSession, view: Visibility, cid: uuid.UUID) -> Conversation:
    """The conversation, or 404 `not_found` when the caller may not see it."""
    found = await ConversationRepository(session).visible(view, cid)
    if found is None:
        raise NotFound("no such conversation")
    return found


def _read(conversation: Conversation, last: datetime | None) -> ConversationRead:
    return ConversationRead.model_validate(conversation).model_copy(
        update={"last_message_at": last}
    )


# --- cursors ------------------------------------------------------------------------------


def encode_cursor(at: datetime, cid: uuid.UUID) -> str:
    raw = json.dumps({"at": at.isoformat(), "id": str(cid)}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    """The cursor's (activity, id); ValueError for anything else (the router answers 422
    naming `cursor` before the handler runs)."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode()))
        at = datetime.fromisoformat(data["at"])
        if at.tzinfo is None:
            raise ValueError("naive time")
        return at, uuid.UUID(data["id"])
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise ValueError("not a cursor this endpoint answered") from exc


def valid_cursor(cursor: str | None) -> str | None:
    """A query parameter's check: the cursor decodes (ValueError otherwise)."""
    if cursor is not None:
        decode_cursor(cursor)
    return cursor


# --- reads --------------------------------------------------------------------------------


async def list_conversations(
    session: AsyncSession, scope: OrgScope, limit: int, cursor: str | None
) -> ConversationPage:
    before = decode_cursor(cursor) if cursor is not None else None
    view = await visibility(session, scope)
    rows = await ConversationRepository(session).page(view, limit + 1, before)
    items = [_read(c, last) for c, last in rows[:limit]]
    more = None
    if len(rows) > limit:
        tail = items[-1]
        more = encode_cursor(tail.last_message_at or tail.created_at, tail.id)
    return ConversationPage(items=items, next_cursor=more)


async def read_thread(
    session: AsyncSession, scope: OrgScope, cid: uuid.UUID, limit: int, after: int
) -> ConversationThread:
    view = await visibility(session, scope)
    conversation = await visible(session, view, cid)
    repo = ConversationRepository(session)
    found = await repo.messages_after(view, cid, after, limit + 1)
    shown = found[:limit]
    last = await repo.last_message_at(view, cid)
    return ConversationThread(
        conversation=_read(conversation, last),
        messages=[MessageView.of(m) for m in shown],
        next_after=shown[-1].id if len(found) > limit else None,
    )


# --- writes -------------------------------------------------------------------------------


async def _store(session: AsyncSession, message: Message) -> Message:
    stored = await ConversationRepository(session).add_message(message)
    WAKEUP.after_commit(session)  # this replica's conversation streams look at once
    return stored


def _client_message(conversation_id: uuid.UUID, scope: OrgScope, content: str) -> Message:
    return Message(
        conversation_id=conversation_id,
        role="customer",
        author=scope.principal.username,
        author_user_id=scope.principal.user_id,
        content=content,
        internal=False,
        meta=None,
    )


async def _audit_message(
    session: AsyncSession, scope: OrgScope, message: Message, action: str
) -> None:
    await record(
        session,
        actor=scope.principal.username,
        action=action,
        target=f"conversation:{message.conversation_id}",
        org_id=scope.org_id,
        details={"message": message.id, "length": len(message.content)},
    )


async def create_conversation(
    session: AsyncSession, scope: OrgScope, body: ConversationCreate
) -> ConversationRead:
    """A new conversation: a client's (it starts it and takes part; `message` is its
    first message), or an operator's (`agents.manage`, no first message)."""
    client = scope.principal.can_in(scope.org_id, PARTICIPATE)
    if body.message is not None and not client:
        raise ValidationFailed(
            "only a client's conversation starts with a message", field="message"
        )
    await ensure_active(session, scope.org_id)
    repo = ConversationRepository(session)
    made = await repo.add(
        Conversation(
            id=body.id or uuid.uuid4(),
            org_id=scope.org_id,
            subject=body.subject,
            created_by=scope.principal.user_id if client else None,
        )
    )
    if client:
        await repo.take_part(made.id, scope.principal.user_id)
    await record(
        session,
        actor=scope.principal.username,
        action="conversation.created",
        target=f"conversation:{made.id}",
        org_id=scope.org_id,
        details={"client": client},
    )
    last = None
    if body.message is not None:
        first = await _store(session, _client_message(made.id, scope, body.message))
        await _audit_message(session, scope, first, "conversation.message")
        last = first.created_at
    return _read(made, last)


async def post_message(
    session: AsyncSession, scope: OrgScope, cid: uuid.UUID, content: str
) -> MessageView:
    """A participant's message (stored as the client's, whatever it sends): 404 for a
    conversation it does not take part in (one it may only read, shared, included)."""
    repo = ConversationRepository(session)
    conversation = await repo.get_in(cid, [scope.org_id])
    if conversation is None or not await repo.takes_part(cid, scope.principal.user_id):
        raise NotFound("no such conversation")
    await ensure_active(session, scope.org_id)
    message = await _store(session, _client_message(cid, scope, content))
    await _audit_message(session, scope, message, "conversation.message")
    return MessageView.of(message)


async def add_note(
    session: AsyncSession, scope: OrgScope, cid: uuid.UUID, content: str
) -> MessageView:
    """An expert's internal note (never shown to a client)."""
    repo = ConversationRepository(session)
    if await repo.get_in(cid, [scope.org_id]) is None:
        raise NotFound("no such conversation")
    note = await _store(
        session,
        Message(
            conversation_id=cid,
            role="expert",
            author=scope.principal.username,
            author_user_id=scope.principal.user_id,
            content=content,
            internal=True,
        ),
    )
    await _audit_message(session, scope, note, "conversation.note")
    return MessageView.of(note)


# --- the conversation's tasks -------------------------------------------------------------


async def live_tasks(kube: KubeClient, org: Org, cid: uuid.UUID) -> list[AgenticTask]:
    """The org's AgenticTasks whose `spec.conversationId` is `cid`, from the API server."""
    found = []
    for raw in await kube.list_tasks(org.namespace):
        spec = raw.get("spec") or {}
        if spec.get("conversationId") != str(cid) or spec.get("orgId") != str(org.id):
            continue
        found.append(AgenticTask.from_wire(raw))
    return found


async def archived_tasks(
    session: AsyncSession, org_id: uuid.UUID, cid: uuid.UUID, exclude: set[str]
) -> list[AgenticTask]:
    rows = await session.execute(
        select(ArchivedTask).where(
            ArchivedTask.org_id == org_id,
            ArchivedTask.spec["conversationId"].as_string() == str(cid),
        )
    )
    return [task_of(row) for row in rows.scalars() if row.uid not in exclude]


def task_views(tasks: list[AgenticTask], now: datetime) -> list[ClientTask]:
    views = [client_task(task, now) for task in tasks]
    views.sort(key=lambda t: (t.created_at or now, t.name), reverse=True)
    return views


async def conversation_tasks(
    session: AsyncSession, kube: KubeClient | None, scope: OrgScope, cid: uuid.UUID
) -> ClientTasks:
    """The tasks started from the conversation (live and archived), newest first."""
    view = await visibility(session, scope)
    await visible(session, view, cid)
    org = await session.get(Org, scope.org_id)
    assert org is not None
    live = await live_tasks(kube, org, cid) if kube is not None else []
    uids = {t.metadata.uid or "" for t in live}
    stored = await archived_tasks(session, org.id, cid, uids)
    return ClientTasks(items=task_views(live + stored, _now()))
