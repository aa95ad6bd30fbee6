"""Conversation endpoints: an org's conversations read both ways (experts and admins see
every one of their org's, clients those they take part in), a client's messages, an
expert's internal notes, a conversation's live stream and the tasks it started, and the
org's client settings. Operators (`agents.manage`) still create conversations and append
messages as before; agents read conversations through the agent API."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Header, Path, Query, Request, status
from fastapi.responses import StreamingResponse
from pydantic import AfterValidator

from platform_api.auth.dependencies import require, require_in_org, require_in_org_any
from platform_api.bounds import MAX_LIMIT, MAX_ROW_ID
from platform_api.conversations import client_settings, service
from platform_api.conversations.client_settings import ClientSettings
from platform_api.conversations.repository import ConversationRepository
from platform_api.conversations.schemas import (
    ContentCreate,
    ConversationCreate,
    ConversationPage,
    ConversationRead,
    ConversationThread,
    MessageCreate,
    MessageRead,
    MessageView,
)
from platform_api.conversations.service import MANAGE, PARTICIPATE, READ_ALL
from platform_api.conversations.stream import ConversationStream
from platform_api.conversations.taskview import ClientTasks
from platform_api.db import Session, Sessions, release
from platform_api.deactivation.repository import ensure_active
from platform_api.errors import NotFound, error_responses
from platform_api.floor.principal import OrgScope, Principal
from platform_api.models import Message
from platform_api.notify.stream import serve
from platform_api.state import AppSettings, MaybeKube

router = APIRouter(tags=["conversations"])

Reader = Annotated[OrgScope, require_in_org_any(READ_ALL, PARTICIPATE)]
Cid = Annotated[uuid.UUID, Path(description="the conversation's id")]
READERS = (
    "Capability `tasks.read` or `conversations.participate`: the first sees every "
    "conversation of the org, internal notes included; a client (the second only) sees the "
    "conversations it takes part in, or all of its org's when the org shares them, never "
    "internal notes. 404 for a conversation the caller may not see, as for one that does "
    "not exist."
)


@router.get(
    "/orgs/{org_id}/conversations",
    response_model=ConversationPage,
    summary="List an org's conversations",
    description=f"{READERS} Newest activity first; `next_cursor` opens the next page "
    "(422 `validation_failed` naming `cursor` for one this endpoint did not answer).",
    responses=error_responses(401, 403, 404, 422),
)
async def list_conversations(
    session: Session,
    scope: Reader,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="1 to 500")] = 50,
    cursor: Annotated[
        str | None, Query(min_length=1, max_length=200), AfterValidator(service.valid_cursor)
    ] = None,
) -> ConversationPage:
    return await service.list_conversations(session, scope, limit, cursor)


@router.post(
    "/orgs/{org_id}/conversations",
    status_code=status.HTTP_201_CREATED,
    response_model=ConversationRead,
    summary="Start a conversation",
    description="Capability `agents.manage` or `conversations.participate` (an operator, "
    "or a client: it is `created_by` and takes part; `message`, when given, is its first "
    "message, dispatched like any other). 404 first for an org the caller is not a member "
    "of. `id` may be given (the id a task's `conversationId` names); 409 `conflict` when "
    "it is taken. Audited `conversation.created` (and `conversation.message`).",
    responses=error_responses(401, 403, 404, 409, 422),
)
async def create_conversation(
    body: ConversationCreate,
    session: Session,
    scope: Annotated[OrgScope, require_in_org_any(MANAGE, PARTICIPATE)],
) -> ConversationRead:
    return await service.create_conversation(session, scope, body)


@router.get(
    "/orgs/{org_id}/conversations/{conversation_id}",
    response_model=ConversationThread,
    summary="Read a conversation and its messages",
    description=f"{READERS} Messages oldest first, after the message id `after` (0: from "
    "the first); `next_after` continues. Each says who wrote it (`author_kind`).",
    responses=error_responses(401, 403, 404, 422),
)
async def read_conversation(
    session: Session,
    scope: Reader,
    conversation_id: Cid,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="1 to 500")] = 100,
    after: Annotated[int, Query(ge=0, le=MAX_ROW_ID, description="the last message id seen")] = 0,
) -> ConversationThread:
    return await service.read_thread(session, scope, conversation_id, limit, after)


@router.post(
    "/orgs/{org_id}/conversations/{conversation_id}/messages",
    status_code=status.HTTP_201_CREATED,
    response_model=MessageView,
    summary="A client's message",
    description="Capability `conversations.participate`, in a conversation the caller "
    "takes part in (404 otherwise, a shared one it only reads included). The body is "
    "`{content}` only (422 for any other field): the message is the caller's "
    "(`author_kind` client, `author` its username), never internal. Audited "
    "`conversation.message` (the content is not in the audit log).",
    responses=error_responses(401, 403, 404, 409, 422),
)
async def post_message(
    body: ContentCreate,
    session: Session,
    scope: Annotated[OrgScope, require_in_org(PARTICIPATE)],
    conversation_id: Cid,
) -> MessageView:
    return await service.post_message(session, scope, conversation_id, body.content)


@router.post(
    "/orgs/{org_id}/conversations/{conversation_id}/notes",
    status_code=status.HTTP_201_CREATED,
    response_model=MessageView,
    summary="An expert's internal note",
    description="Capability `tasks.read`. Stored `internal`: never shown to a client (not "
    "in its reads, its stream, nor its tasks). Audited `conversation.note`.",
    responses=error_responses(401, 403, 404, 422),
)
async def add_note(
    body: ContentCreate,
    session: Session,
    scope: Annotated[OrgScope, require_in_org(READ_ALL)],
    conversation_id: Cid,
) -> MessageView:
    return await service.add_note(session, scope, conversation_id, body.content)


@router.get(
    "/orgs/{org_id}/conversations/{conversation_id}/tasks",
    response_model=ClientTasks,
    summary="The tasks a conversation started",
    description=f"{READERS} The AgenticTasks whose `spec.conversationId` is the "
    "conversation, live and archived, newest first: each step in plain language (its "
    "parameters only as a redacted summary), its decision, execution and result.",
    responses=error_responses(401, 403, 404, 422),
)
async def conversation_tasks(
    session: Session, kube: MaybeKube, scope: Reader, conversation_id: Cid
) -> ClientTasks:
    return await service.conversation_tasks(session, kube, scope, conversation_id)


@router.get(
    "/orgs/{org_id}/conversations/{conversation_id}/events",
    summary="A conversation's live stream",
    description=f"{READERS} Server-sent events, with the rules of `GET /human-tasks/events`: "
    "`message` (a message; `id` is its id, sent back as `Last-Event-ID` to resume) and "
    "`task` (a task of the conversation as `/tasks` shows it, when it changed). The stream "
    "ends when the caller is deactivated, leaves the org, or may no longer see the "
    "conversation.",
    response_class=StreamingResponse,
    responses={
        200: {"content": {"text/event-stream": {}}, "description": "the event stream"},
        **error_responses(401, 403, 404, 422),
    },
)
async def conversation_events(
    request: Request,
    session: Session,
    sessions: Sessions,
    settings: AppSettings,
    kube: MaybeKube,
    scope: Reader,
    conversation_id: Cid,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID", max_length=64)] = None,
) -> StreamingResponse:
    view = await service.visibility(session, scope)
    await service.visible(session, view, conversation_id)
    await release(session)  # the stream reads in sessions of its own: hold none meanwhile
    stream = ConversationStream(sessions, settings, kube, view, conversation_id)
    start = await stream.start(last_event_id)

    async def body() -> AsyncIterator[bytes]:
        async for chunk in serve(
            stream, start, request.is_disconnected, stream.interval, stream.heartbeat
        ):
            yield chunk

    return StreamingResponse(
        body(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


@router.get(
    "/orgs/{org_id}/client-settings",
    response_model=ClientSettings,
    summary="Read the org's client settings",
    description="Capability `tasks.read`. Whether clients share conversations, the risks "
    "the initiating client confirms, and when a reply to a client skips review.",
    responses=error_responses(401, 403, 404, 422),
)
async def get_client_settings(
    session: Session, scope: Annotated[OrgScope, require_in_org(READ_ALL)]
) -> ClientSettings:
    return await client_settings.get_settings(session, scope)


@router.put(
    "/orgs/{org_id}/client-settings",
    response_model=ClientSettings,
    summary="Set the org's client settings",
    description="Capability `policy.manage`. Replaces them (a field left out takes its "
    "default: not shared, `high` and `critical` confirmed, no auto-send). 422 naming the "
    "field for a risk outside low, medium, high, critical or a `min_confidence` outside "
    "0 to 1. Audited `org.client_settings`.",
    responses=error_responses(401, 403, 404, 422),
)
async def put_client_settings(
    body: ClientSettings,
    session: Session,
    scope: Annotated[OrgScope, require_in_org("policy.manage")],
) -> ClientSettings:
    return await client_settings.put_settings(session, scope, body)


@router.post(
    "/conversations/{conversation_id}/messages",
    status_code=status.HTTP_201_CREATED,
    response_model=MessageRead,
    summary="Append a message to a conversation",
    description="Capability `agents.manage`. 404 for a conversation of an org the caller is "
    "not a member of. Messages are stored as written; the review queue redacts them when "
    "it shows them.",
    responses=error_responses(401, 403, 404, 422),
)
async def add_message(
    conversation_id: Annotated[uuid.UUID, Path()],
    body: MessageCreate,
    session: Session,
    principal: Annotated[Principal, require("agents.manage")],
) -> MessageRead:
    repo = ConversationRepository(session)
    conversation = await repo.get_in(conversation_id, principal.org_ids)
    if conversation is None:
        raise NotFound("no such conversation")
    await ensure_active(session, conversation.org_id)  # no new work
    message = await repo.add_message(
        Message(
            conversation_id=conversation.id,
            role=body.role,
            author=body.author,
            content=body.content,
        )
    )
    return MessageRead.model_validate(message)
