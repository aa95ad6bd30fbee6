"""Conversation endpoints for org admins and operators: create a conversation of an org
and append messages to it. Agents read conversations through the agent API; experts see
them, redacted, in the review queue's detail view (`GET /human-tasks/{id}`)."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Path, status

from platform_api.access.principal import OrgScope, Principal
from platform_api.activity.repository import ensure_active
from platform_api.audit.service import record
from platform_api.auth.dependencies import require, require_in_org
from platform_api.conversations.repository import ConversationRepository
from platform_api.conversations.schemas import (
    ConversationCreate,
    ConversationRead,
    MessageCreate,
    MessageRead,
)
from platform_api.db import Session
from platform_api.errors import NotFound, error_responses
from platform_api.models import Conversation, Message

router = APIRouter(tags=["conversations"])


@router.post(
    "/orgs/{org_id}/conversations",
    status_code=status.HTTP_201_CREATED,
    response_model=ConversationRead,
    summary="Create a conversation",
    description="Capability `agents.manage` (404 first for an org the caller is not a member "
    "of). `id` may be given (the id a task's `conversationId` names); 409 `conflict` when "
    "it is taken.",
    responses=error_responses(401, 403, 404, 409, 422),
)
async def create_conversation(
    body: ConversationCreate,
    session: Session,
    scope: Annotated[OrgScope, require_in_org("agents.manage")],
) -> ConversationRead:
    made = await ConversationRepository(session).add(
        Conversation(id=body.id or uuid.uuid4(), org_id=scope.org_id, subject=body.subject)
    )
    await record(
        session,
        actor=scope.principal.username,
        action="conversation.created",
        target=f"conversation:{made.id}",
        org_id=scope.org_id,
    )
    return ConversationRead.model_validate(made)


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
    await ensure_active(session, conversation.org_id)  # issue 15 (onboard): no new work
    message = await repo.add_message(
        Message(
            conversation_id=conversation.id,
            role=body.role,
            author=body.author,
            content=body.content,
        )
    )
    return MessageRead.model_validate(message)
