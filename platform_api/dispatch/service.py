"""Dispatching one claimed client message: classify, act, record, report.

The agent classifies (it holds the org's model and its configuration, seed 000's keyword
dispatch and `AGENT_DEFAULT_MODE`): the platform sends it the signed chat command for
the message, and the answer's `mode` says what follows.

- `domain`: the answer is the draft; `replies.settle` keeps it under the review rules
  (it waits for an expert unless the org's admin rule lets it be sent), requested by
  the client who wrote the message.
- `agentic`: the platform asks the agent for a plan of the message (a plan request id
  and an Idempotency-Key both derived from the message, so a second attempt after a
  lost claim names the same request and the agent answers with the task it filed the
  first time), bound to the client as requester before the agent is asked
  (`agents.bindings`) and on the task once it answered (the platform-only annotation,
  as `agents.planning` writes it); the conversation is told that the plan waits for an
  expert's review.
- the agent fails, refuses or takes longer than `dispatch_timeout_seconds`: the dispatch
  is `failed` with the reason, the conversation says so, and the experts are told (the
  notify event `dispatch_failed`, on the live stream and the org's webhook).

Each outcome (the draft, the system message, the event) is written in the same
transaction as `claims.finish`, which writes only while this dispatcher still holds the
claim: a message gets one outcome, whoever finishes it.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from humanwork_core import tracing
from humanwork_core.requester import plan_request_id
from platform_api.agents.bindings import bind_before_asking, mark_bound
from platform_api.agents.commands import AgentTarget
from platform_api.agents.planning import PlanRequest, plan_command
from platform_api.corrections import service as corrections
from platform_api.dispatch import claims
from platform_api.dispatch.agents import AgentPort
from platform_api.errors import AgentRefused, PlatformError
from platform_api.floor.audit.service import record
from platform_api.models import Message, Org, User
from platform_api.notify.emitter import emit
from platform_api.notify.events import DISPATCH_FAILED
from platform_api.replies import service as replies

log = logging.getLogger(__name__)

FAILED_TEXT = "The agent did not answer; an expert was told."
PLAN_TEXT = "The agent prepared a plan; it waits for an expert's review."
HISTORY = 50
PLAN_REQUEST_MAX = 4096


class LostClaim(Exception):
    """Another dispatcher took the claim over: this one writes nothing."""


@dataclass(frozen=True)
class Work:
    """A claimed message and what the agent is asked with."""

    claim: claims.Claim
    org: Org
    message: Message
    client: str
    """The username of the client who wrote the message (the request's requester)."""
    history: list[dict[str, str]]
    corrections: list[dict[str, Any]]


async def load(session: AsyncSession, claim: claims.Claim) -> Work:
    """The message, its org, its author and the thread before it."""
    message = await session.get(Message, claim.message_id)
    org = await session.get(Org, claim.org_id)
    if message is None or org is None:
        raise AgentRefused("the message is gone", agentCode="no_message")
    author = await session.get(User, message.author_user_id)
    rows = await session.execute(
        select(Message)
        .where(
            Message.conversation_id == message.conversation_id,
            Message.id < message.id,
            Message.internal.is_(False),
        )
        .order_by(Message.id.desc())
        .limit(HISTORY)
    )
    roles = {"customer": "user", "agent": "assistant", "expert": "assistant"}
    history = [
        {"role": roles.get(m.role, "system"), "content": m.content}
        for m in reversed(list(rows.scalars()))
    ]
    client = author.username if author is not None else f"user:{message.author_user_id}"
    payload = await corrections.chat_payload(session, org.id)
    return Work(claim, org, message, client, history, payload)


class Dispatch:
    """Dispatches claimed messages for one dispatcher (`holder`)."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        agents: AgentPort,
        holder: str,
        timeout: float,
    ) -> None:
        self.sessions, self.agents, self.holder, self.timeout = sessions, agents, holder, timeout

    async def run(self, claim: claims.Claim) -> str:
        """Dispatch the claimed message; its final state (or `lost`)."""
        try:
            async with asyncio.timeout(self.timeout):
                return await self._act(claim)
        except LostClaim:
            return "lost"
        except TimeoutError:
            return await self._fail(claim, "timeout: the agent took too long")
        except PlatformError as exc:
            return await self._fail(claim, _reason(exc))
        except Exception as exc:  # never silence: any other failure is a visible state
            log.exception("dispatch of message %s failed", claim.message_id)
            return await self._fail(claim, f"error: {type(exc).__name__}")

    async def _act(self, claim: claims.Claim) -> str:
        async with self.sessions() as session:
            work = await load(session, claim)
            target = await self.agents.target(session, work.org, work.message.content)
        command = {
            "message": work.message.content,
            "conversationId": str(claim.conversation_id),
            "history": work.history,
            "corrections": work.corrections,
        }
        answer = await self.agents.send(target, "/v1/chat", command)
        if str(answer.get("mode") or "") == "agentic":
            return await self._plan(work, target)
        prepared = replies.Prepared(
            target,
            claim.conversation_id,
            work.message,
            command,
            replies.threshold_of(target.instance),
        )
        checked = replies.checked_answer(target, answer)
        async with self.sessions() as session, session.begin():
            draft = await replies.settle(session, prepared, checked, work.client)
            await self._finish(
                session,
                claim,
                claims.DRAFTED,
                mode="domain",
                agent=target.agent_id,
                reply_id=draft.id,
            )
        return claims.DRAFTED

    async def _plan(self, work: Work, target: AgentTarget) -> str:
        """Ask the agent for a plan of the message, bound to the client. The trace starts
        here (`humanwork.client_message`): the command carries it to the agent and the
        binding writes it on the task, as a plan request through the API does."""
        attributes = {"humanwork.org.id": str(work.org.id), "humanwork.agent": target.name}
        with tracing.span("humanwork.client_message", attributes) as current:
            name = await self._plan_traced(work, target)
            tracing.annotate(current, {"humanwork.task": f"{target.org.namespace}/{name}"})
            return claims.PLANNED

    async def _plan_traced(self, work: Work, target: AgentTarget) -> str:
        org, claim = work.org, work.claim
        key = f"message-{claim.message_id}"
        request_id = plan_request_id(str(org.id), target.name, work.client, key)
        await bind_before_asking(self.sessions, org.id, target.name, work.client, request_id)
        body = PlanRequest(
            request=work.message.content[:PLAN_REQUEST_MAX], conversationId=claim.conversation_id
        )
        command = plan_command(body, work.client, request_id)
        command["corrections"] = work.corrections
        planned = await self.agents.send(target, "/v1/tasks", command, key)
        name = str(planned.get("name") or "")
        if not name:
            raise AgentRefused("the agent filed no plan", agent=target.agent_id)
        bound = await self.agents.bind(target, name, request_id, work.client)
        async with self.sessions() as session, session.begin():
            await self._finish(
                session, claim, claims.PLANNED, mode="agentic", agent=target.agent_id, task=name
            )
            if bound:
                await mark_bound(session, request_id, name)
            await _audit_plan(session, work, target, name, planned, bound)
            session.add(_system(claim, PLAN_TEXT, {"event": "plan_waiting", "task": name}))
        return name

    async def _finish(
        self, session: AsyncSession, claim: claims.Claim, state: str, **outcome: object
    ) -> None:
        if not await claims.finish(session, claim, self.holder, state, **outcome):
            raise LostClaim(str(claim.message_id))

    async def _fail(self, claim: claims.Claim, reason: str) -> str:
        """Record the failure, tell the conversation and the experts."""
        try:
            async with self.sessions() as session, session.begin():
                await self._finish(session, claim, claims.FAILED, error=reason[:2000])
                session.add(
                    _system(
                        claim,
                        FAILED_TEXT,
                        {"event": "dispatch_failed", "message": claim.message_id},
                    )
                )
                await emit(
                    session,
                    claim.org_id,
                    DISPATCH_FAILED,
                    {
                        "event_id": f"dispatch/{claim.message_id}:failed",
                        "conversation_id": str(claim.conversation_id),
                        "message_id": claim.message_id,
                        "reason": reason[:500],
                    },
                )
        except LostClaim:
            return "lost"
        log.warning("dispatch of message %s failed: %s", claim.message_id, reason)
        return claims.FAILED


def _reason(exc: PlatformError) -> str:
    details = exc.public_details()
    extra = details.get("agentCode") or details.get("reason")
    return f"{exc.code}: {exc.message}" + (f" ({extra})" if extra else "")


def _system(claim: claims.Claim, text: str, meta: dict[str, Any]) -> Message:
    return Message(
        conversation_id=claim.conversation_id,
        role="system",
        author="platform",
        content=text,
        internal=False,
        meta=meta,
    )


async def _audit_plan(
    session: AsyncSession,
    work: Work,
    target: AgentTarget,
    name: str,
    planned: dict[str, Any],
    bound: bool,
) -> None:
    await record(
        session,
        actor=work.client,
        action="task.plan_requested",
        target=f"task:{work.org.namespace}/{name}",
        org_id=work.org.id,
        details={
            "agent": target.agent_id,
            "created": bool(planned.get("created", True)),
            "requesterBound": bound,
            "dispatch": {"message_id": work.claim.message_id},
        },
    )


def new_holder() -> str:
    """A dispatcher's id (unique per process start)."""
    return f"dispatcher-{uuid.uuid4().hex[:12]}"
