"""Reply endpoints: `POST /orgs/{org_id}/conversations/{conversation_id}/replies` asks
the org's agent for a draft (`Accept: text/event-stream` streams it); `GET
/human-tasks/replies/{id}` and `POST /human-tasks/replies/{id}/resume` show and decide a
draft waiting in the review queue (see `replies.service`)."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Header, status
from fastapi.responses import JSONResponse, StreamingResponse
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from platform_api.agents.commands import AgentCommands, Commands
from platform_api.auth.dependencies import require, require_in_org
from platform_api.corrections import service as corrections
from platform_api.db import Session, Sessions
from platform_api.errors import NotFound, PlatformError, error_responses
from platform_api.floor.principal import OrgScope, Principal
from platform_api.human_tasks.redact import redact
from platform_api.human_tasks.service import conversation_thread
from platform_api.models import Org
from platform_api.replies import service as replies
from platform_api.replies.repository import ReplyRepository
from platform_api.replies.schemas import ReplyCreate, ReplyDecision, ReplyDetail, ReplyRead
from platform_api.state import MaybeKube

log = logging.getLogger(__name__)

router = APIRouter(tags=["replies"])

AGENT_CODES = {502: ("agent_unreachable", "the agent did not answer")}


@router.post(
    "/orgs/{org_id}/conversations/{conversation_id}/replies",
    status_code=status.HTTP_201_CREATED,
    response_model=ReplyRead,
    summary="Ask the org's agent to draft a reply",
    description="Capability `run.control` (404 first for an org the caller is not a member "
    "of, a conversation or `agent` the org does not have). The platform sends the agent a "
    "signed chat command for the conversation's last client message (with the thread "
    "before it and the org's corrections); 422 `validation_failed` (`details.reason` "
    "`no_client_message`) when no client wrote yet. A draft below the agent's "
    "`spec.confidenceThreshold`, flagged for review, or of high or critical risk waits in "
    "the review queue as a `reply` item (`state: pending`); any other is appended to the "
    "conversation as the agent's message (`state: sent`, audited `reply.sent`). The chat "
    "is audited as `reply.drafted` (redacted). With `Accept: text/event-stream` the "
    "agent's stream is passed through (`event: token` pieces, its `event: done`), then "
    "`event: decision` with this endpoint's JSON answer (or `event: error` with "
    "`{code, message, details}`). 502 `agent_unreachable` / `agent_refused` when the "
    "agent cannot draft.",
    responses=error_responses(401, 403, 404, 422, 502, 503, codes=AGENT_CODES),
)
async def draft_reply(
    conversation_id: uuid.UUID,
    body: ReplyCreate,
    session: Session,
    sessions: Sessions,
    kube: MaybeKube,
    commands: Commands,
    scope: Annotated[OrgScope, require_in_org("run.control")],
    accept: Annotated[str | None, Header(max_length=1000)] = None,
) -> Any:
    prepared = await replies.prepare(session, kube, scope.org_id, conversation_id, body.agent)
    requested_by = scope.principal.username
    if accept and "text/event-stream" in accept:
        return StreamingResponse(
            _stream(commands, sessions, prepared, requested_by),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
    answer = await commands.send(prepared.target, "/v1/chat", prepared.command)
    draft = await replies.settle(session, prepared, answer, requested_by)
    return JSONResponse(
        replies.read(draft, prepared.threshold).model_dump(mode="json"), status_code=201
    )


async def _stream(
    commands: AgentCommands,
    sessions: async_sessionmaker[AsyncSession],
    prepared: replies.Prepared,
    requested_by: str,
) -> AsyncIterator[bytes]:
    """The agent's SSE lines as they come, then the platform's `decision` event."""
    event, final = "", None
    try:
        async for line in commands.stream(prepared.target, "/v1/chat/stream", prepared.command):
            yield f"{line}\n".encode()
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:") and event == "done":
                final = json.loads(line[5:].strip())
        if final is None:
            return  # the agent reported its error in the stream
        async with sessions() as session, session.begin():
            draft = await replies.settle(session, prepared, final, requested_by)
            decided = replies.read(draft, prepared.threshold).model_dump(mode="json")
        yield _sse("decision", decided)
    except PlatformError as exc:
        yield _sse("error", exc.body())
    except ValueError:
        yield _sse("error", {"code": "agent_refused", "message": "bad stream", "details": {}})


def _sse(event: str, data: Any) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


@router.get(
    "/human-tasks/replies/{reply_id}",
    response_model=ReplyDetail,
    summary="A draft reply in detail",
    description="Capability `tasks.read`. The draft of the queue item `replies/<id>`, "
    "its confidence, risk and state, the client message it answers and the conversation "
    "(its last 200 messages), redacted like a step's thread. 404 for a draft of an org the "
    "caller is not a member of.",
    responses=error_responses(401, 403, 404, 422),
)
async def get_reply(
    reply_id: uuid.UUID,
    session: Session,
    principal: Annotated[Principal, require("tasks.read")],
) -> ReplyDetail:
    draft = await ReplyRepository(session).get_in(reply_id, principal.org_ids)
    if draft is None:
        raise NotFound("no such human task")
    return ReplyDetail(
        **replies.read(draft).model_dump(),
        client_message=redact(draft.client_message)[0],
        conversation=await conversation_thread(session, draft.conversation_id, draft.org_id),
    )


@router.post(
    "/human-tasks/replies/{reply_id}/resume",
    response_model=ReplyRead,
    summary="Decide a draft reply",
    description="Capability `run.control`, as for a step. `approve` sends the draft, "
    "`edit` sends `text` instead, `reject` (with `feedback`) discards it. Sent text is "
    "appended to the conversation as the agent's message (`reply.sent`); the decision is "
    "audited as `reply.approve`, `reply.edit` or `reply.reject`. An edit or a rejection "
    "becomes a correction of the org (`GET /orgs/{id}/corrections`), pushed to its "
    "agents. 403 `self_approval_forbidden` when the caller asked for the draft and "
    "approves or edits it (rejecting stays open to them). 409 `run_state_conflict` when "
    "the draft was decided already; 404 for a draft of an org the caller is not a member "
    "of.",
    responses=error_responses(
        401,
        403,
        404,
        409,
        422,
        codes={403: ("self_approval_forbidden", "the caller asked for this draft")},
    ),
)
async def decide_reply(
    reply_id: uuid.UUID,
    body: ReplyDecision,
    session: Session,
    kube: MaybeKube,
    commands: Commands,
    principal: Annotated[Principal, require("run.control")],
) -> ReplyRead:
    draft, correction = await replies.decide(session, principal, reply_id, body)
    if correction is not None:
        org = await session.get(Org, draft.org_id)
        if org is not None:
            await corrections.push(commands, kube, org, [correction])
    return replies.read(draft)
