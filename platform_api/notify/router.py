"""`/orgs/{id}/webhooks` (an org's outgoing webhook and its deliveries) and
`GET /human-tasks/events`, the workspace's live event stream (server-sent events)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Header, Request, status
from fastapi.responses import StreamingResponse
from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.auth.dependencies import require, require_in_org
from platform_api.bounds import Limit, Offset
from platform_api.db import Session, Sessions, release
from platform_api.errors import error_responses
from platform_api.floor.accounts import UserRepository
from platform_api.floor.principal import OrgScope, Principal
from platform_api.integrations.crypto import Cipher
from platform_api.notify import service
from platform_api.notify.schemas import DeliveryPage, WebhookPut, WebhookRead, WebhookSet
from platform_api.notify.stream import EventStream
from platform_api.state import AppSettings
from platform_api.tools.upstreams.egress import EgressDep

router = APIRouter(prefix="/orgs/{org_id}/webhooks", tags=["notifications"])
events_router = APIRouter(prefix="/human-tasks", tags=["notifications"])

MANAGE = "orgs.manage"


@router.get(
    "",
    response_model=WebhookRead,
    summary="Read an org's webhook",
    description="Capability `orgs.manage`. The URL and the events delivered; never the secret.",
    responses=error_responses(401, 403, 404, 422),
)
async def get_webhook(
    session: Session, scope: Annotated[OrgScope, require_in_org(MANAGE)]
) -> WebhookRead:
    return await service.get_webhook(session, scope.org_id)


@router.put(
    "",
    response_model=WebhookSet,
    response_model_exclude_none=True,
    summary="Set an org's webhook",
    description="Capability `orgs.manage`. Replaces the org's webhook. The URL passes the "
    "upstreams' egress checks (https, a public address: never loopback, private ranges or "
    "the metadata address; 422 `integration_endpoint_refused` with `details.reason`). "
    "Without `secret` the platform generates one and answers it in this response only. "
    "Each delivery is a POST of `{id, event, org_id, occurred_at, data}` signed "
    "`X-Humanwork-Signature: t=<unix>,v1=<hex HMAC-SHA256 of '<t>.<body>'>`; the `id` is "
    "stable (deliveries are at least once: drop duplicates by id). Audited.",
    responses=error_responses(401, 403, 404, 422),
)
async def put_webhook(
    body: WebhookPut,
    session: Session,
    egress: EgressDep,
    cipher: Cipher,
    scope: Annotated[OrgScope, require_in_org(MANAGE)],
) -> WebhookSet:
    return await service.put_webhook(session, scope, body, egress, cipher)


@router.delete(
    "",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Remove an org's webhook",
    description="Capability `orgs.manage`. Its pending deliveries are dropped. Audited.",
    responses=error_responses(401, 403, 404, 422),
)
async def delete_webhook(
    session: Session, scope: Annotated[OrgScope, require_in_org(MANAGE)]
) -> None:
    await service.delete_webhook(session, scope)


@router.get(
    "/deliveries",
    response_model=DeliveryPage,
    summary="An org's webhook deliveries",
    description="Capability `orgs.manage`. Newest first, each with its state (pending, "
    "delivered, failed) and every attempt (time, HTTP status or error).",
    responses=error_responses(401, 403, 404, 422),
)
async def list_deliveries(
    session: Session,
    scope: Annotated[OrgScope, require_in_org(MANAGE)],
    offset: Offset = 0,
    limit: Limit = 50,
) -> DeliveryPage:
    return await service.deliveries(session, scope.org_id, offset, limit)


@events_router.get(
    "/events",
    summary="The live event stream",
    description="Capability `tasks.read`. Server-sent events of the caller's orgs (decision "
    "needed, decided, near deadline, escalated, expired, rejected, step failed, completed, "
    "failed): `id` (send it back as `Last-Event-ID` to resume after a reconnect), `event`, "
    "`data` (the webhook body). A comment line every `HUMANWORK_EVENTS_HEARTBEAT_SECONDS` "
    "keeps idle connections open. The stream leaves an org the caller is removed from (or "
    "whose role no longer reads it) and ends when none is left or the user is deactivated, "
    "within `HUMANWORK_NOTIFY_INTERVAL_SECONDS` (at once on the replica that made the change).",
    response_class=StreamingResponse,
    responses={
        200: {"content": {"text/event-stream": {}}, "description": "the event stream"},
        **error_responses(401, 403, 422),
    },
)
async def event_stream(
    request: Request,
    session: Session,
    sessions: Sessions,
    settings: AppSettings,
    principal: Annotated[Principal, require("tasks.read")],
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID", max_length=64)] = None,
) -> StreamingResponse:
    async def access(session: AsyncSession) -> frozenset[uuid.UUID]:
        return await UserRepository(session).orgs_holding(principal.user_id, "tasks.read")

    await release(session)  # the stream reads in sessions of its own: hold none meanwhile
    stream = EventStream(sessions, settings, principal.org_ids, access)
    start = await stream.start(last_event_id)

    async def body() -> AsyncIterator[bytes]:
        async for chunk in stream.run(start, request.is_disconnected):
            yield chunk

    return StreamingResponse(
        body(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )
