"""`POST /v1/chat` and `POST /v1/chat/stream`: draft a reply (UC-1, UC-2)."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from agent_image.commands import ChatRequest, error_body, parse
from agent_image.platform import PlatformError
from agent_image.responder import Reply
from agent_image.routes.corrections import from_command
from agent_image.routes.deps import RuntimeDep, Signed
from agent_image.runtime import Runtime

LOG = logging.getLogger("humanwork.agent")

router = APIRouter(prefix="/v1", tags=["chat"])


async def gather(rt: Runtime, body: ChatRequest) -> tuple[list[dict[str, Any]], list[str]]:
    """History and knowledge for a model prompt (best effort; none offline)."""
    if body.corrections:  # the platform's corrections of the org, kept here
        missing = rt.corrections.missing([from_command(c) for c in body.corrections])
        if missing:
            rt.corrections.add(missing)
    history = [m.model_dump() for m in body.history or []]
    context = list(body.context or [])
    if rt.gate.usable() is None:
        return history, context
    if body.history is None and body.conversation_id:
        with contextlib.suppress(PlatformError):
            history = [
                {"role": m.get("role", "user"), "content": m.get("content", "")}
                for m in await rt.platform.messages(body.conversation_id, attempts=1)
            ]
    if body.context is None:
        with contextlib.suppress(PlatformError):
            found = await rt.platform.context(body.message, limit=5, attempts=1)
            context = [
                str(r.get("content") or r.get("text") or r.get("snippet") or "") for r in found
            ]
            context = [c for c in context if c]
    return history, context


@router.post("/chat")
async def chat(raw: Signed, rt: RuntimeDep) -> dict[str, Any]:
    """Draft a reply (UC-1): `{reply, confidence, risk_level, flag_for_review, model,
    usage, mode, responder, corrections_used, tool_calls}`."""
    body = parse(ChatRequest, raw)
    history, context = await gather(rt, body)
    reply = await rt.responder.reply(body.message, rt.config(), history=history, context=context)
    rt.metrics.replied(reply.responder, reply.flag_for_review)
    return reply.as_dict()


@router.post("/chat/stream")
async def chat_stream(raw: Signed, rt: RuntimeDep) -> StreamingResponse:
    """The reply as Server-Sent Events (UC-2): `event: token` with `{"text"}` per piece
    as it is produced, then `event: done` with the whole reply (as /v1/chat answers
    it), or `event: error` with `{code, message}`."""
    body = parse(ChatRequest, raw)
    history, context = await gather(rt, body)
    config = rt.config()

    async def events() -> AsyncIterator[bytes]:
        try:
            async for item in rt.responder.stream(
                body.message, config, history=history, context=context
            ):
                if isinstance(item, Reply):
                    rt.metrics.replied(item.responder, item.flag_for_review)
                    yield _sse("done", item.as_dict())
                else:
                    yield _sse("token", {"text": item})
        except Exception as exc:  # the stream is already open: report in it
            LOG.exception("chat stream failed")
            yield _sse("error", error_body("llm_failed", str(exc)[:500]))

    return StreamingResponse(
        events(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def _sse(event: str, data: Any) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()
