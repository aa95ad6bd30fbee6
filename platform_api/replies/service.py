"""Reply use cases: ask the org's agent for a draft (signed `/v1/chat` command), then send
it or queue it; decide a queued draft.

The agent answers with the draft, its confidence (0 to 1), risk and `flag_for_review`.
The agent is untrusted, and its confidence and risk are its own claims, which the client's
text reaches (a message may ask the model to "rate your confidence 10"). So a draft skips
review only under a rule the org's admin set (`orgs.reply_auto_send`: `{max_risk,
min_confidence}`; null, the default: every draft is reviewed), and even then only when it
also clears the AgentInstance's `spec.confidenceThreshold` (percent, 70 unless set; 100:
every draft), is not flagged and is not of high or critical risk; any other draft waits
in the review queue (kind `reply`). A draft that skips review is appended to the
conversation as the agent's message. Every
draft is audited as `reply.drafted` with the client message and the draft redacted (as the
review queue redacts them), and every message sent as `reply.sent`. An expert approves
(the draft is sent), edits (the edited text is sent, and a `reply_edit` correction is kept)
or rejects with feedback (nothing is sent; a `reply_rejected` correction is kept); audited
as `reply.approve`, `reply.edit`, `reply.reject`, like a step's decisions. As with a
step, the person who asked for the draft (`requested_by`, the caller the platform
recorded, never a name the agent gave) cannot approve or edit it (403
`self_approval_forbidden`); they may reject it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from humanwork_core.resources import Risk
from platform_api.agents.commands import AgentTarget, org_agent, require_kube
from platform_api.conversations.repository import ConversationRepository
from platform_api.corrections import service as corrections
from platform_api.errors import (
    AgentRefused,
    NotFound,
    RunStateConflict,
    SelfApproval,
    ValidationFailed,
)
from platform_api.floor.audit.service import record
from platform_api.floor.principal import Principal
from platform_api.human_tasks.redact import redact
from platform_api.kube.client import KubeClient
from platform_api.models import ExpertCorrection, Message, Org, ReplyDraft
from platform_api.notify.emitter import emit
from platform_api.replies.repository import ReplyRepository
from platform_api.replies.schemas import ReplyDecision, ReplyRead

HISTORY = 200
DEFAULT_THRESHOLD = 70
_ROLES = {"customer": "user", "agent": "assistant", "expert": "assistant", "system": "system"}


@dataclass(frozen=True)
class Prepared:
    """A chat command ready to sign: the agent, the client message it answers, the
    command's body and the agent's confidence threshold (0 to 1)."""

    target: AgentTarget
    conversation_id: uuid.UUID
    message: Message
    command: dict[str, Any]
    threshold: float


def threshold_of(instance: dict[str, Any]) -> float:
    """The AgentInstance's confidence threshold, 0 to 1."""
    value = (instance.get("spec") or {}).get("confidenceThreshold", DEFAULT_THRESHOLD)
    try:
        return max(0.0, min(100.0, float(value))) / 100
    except (TypeError, ValueError):
        return DEFAULT_THRESHOLD / 100


def allowed_by_rule(answer: dict[str, Any], rule: dict[str, Any] | None) -> bool:
    """Whether the admin's auto-send rule (`orgs.reply_auto_send`) lets the draft skip
    review: a rule is set, well formed, and the draft is within its risk and confidence."""
    if not isinstance(rule, dict):
        return False
    try:
        max_risk = Risk(str(rule.get("max_risk")))
        min_confidence = float(rule.get("min_confidence"))  # type: ignore[arg-type]
        risk = Risk(str(answer["risk_level"]))
    except (TypeError, ValueError):
        return False
    return risk.rank <= max_risk.rank and float(answer["confidence"]) >= min_confidence


def needs_review(
    answer: dict[str, Any], threshold: float, rule: dict[str, Any] | None = None
) -> bool:
    """Whether a draft goes to an expert (see the module docstring). Without the admin's
    rule every draft does. A threshold of 100 means every draft: the agent's confidence
    is its own claim, so no confidence it reports may carry a draft past an org that
    reviews them all."""
    return (
        not allowed_by_rule(answer, rule)
        or threshold >= 1.0
        or float(answer["confidence"]) < threshold
        or bool(answer["flag_for_review"])
        or answer["risk_level"] in ("high", "critical")
    )


def checked_answer(target: AgentTarget, answer: dict[str, Any]) -> dict[str, Any]:
    """The agent's draft with the fields the platform relies on; AgentRefused otherwise."""
    reply, confidence = answer.get("reply"), answer.get("confidence")
    risk = answer.get("risk_level")
    if (
        not isinstance(reply, str)
        or not reply.strip()
        or isinstance(confidence, bool)
        or not isinstance(confidence, int | float)
        or risk not in ("low", "medium", "high", "critical")
    ):
        raise AgentRefused(
            "the agent's draft is not valid", agent=target.agent_id, agentCode="bad_draft"
        )
    return {
        **answer,
        "reply": reply[:20000],
        "confidence": max(0.0, min(1.0, float(confidence))),
        "flag_for_review": bool(answer.get("flag_for_review", True)),
    }


async def prepare(
    session: AsyncSession,
    kube: KubeClient | None,
    org_id: uuid.UUID,
    conversation_id: uuid.UUID,
    agent: str,
) -> Prepared:
    """The chat command for the conversation's last client message (NotFound for a
    conversation or agent the org does not have; 422 when no client wrote yet)."""
    found = require_kube(kube, "drafting a reply")
    repo = ConversationRepository(session)
    if await repo.get_in(conversation_id, {org_id}) is None:
        raise NotFound("no such conversation")
    target = await org_agent(session, found, org_id, agent)
    thread = await repo.messages(conversation_id, HISTORY)
    at = next((i for i in range(len(thread) - 1, -1, -1) if thread[i].role == "customer"), None)
    if at is None:
        raise ValidationFailed(
            "the conversation has no client message to answer", reason="no_client_message"
        )
    history = [{"role": _ROLES.get(m.role, "user"), "content": m.content} for m in thread[:at]]
    command = {
        "message": thread[at].content,
        "conversationId": str(conversation_id),
        "history": history,
        "corrections": await corrections.chat_payload(session, org_id),
    }
    return Prepared(target, conversation_id, thread[at], command, threshold_of(target.instance))


async def settle(
    session: AsyncSession, prepared: Prepared, answer: dict[str, Any], requested_by: str
) -> ReplyDraft:
    """Keep the agent's draft, audit the chat, then send it or queue it."""
    answer = checked_answer(prepared.target, answer)
    org = await session.get(Org, prepared.target.org.id)
    review = needs_review(answer, prepared.threshold, org.reply_auto_send if org else None)
    draft = await ReplyRepository(session).add(
        ReplyDraft(
            id=uuid.uuid4(),
            org_id=prepared.target.org.id,
            conversation_id=prepared.conversation_id,
            agent=prepared.target.name,
            message_id=prepared.message.id,
            client_message=prepared.message.content,
            draft=answer["reply"],
            confidence=answer["confidence"],
            risk=answer["risk_level"],
            flag_for_review=answer["flag_for_review"],
            state="pending",
            requested_by=requested_by,
        )
    )
    await _audit_chat(session, prepared, draft, answer, review)
    if review:
        await emit(session, draft.org_id, "reply.needs_review", _event(draft))
    else:
        await send(session, draft, draft.draft, by=f"agent:{prepared.target.agent_id}")
    return draft


async def _audit_chat(
    session: AsyncSession,
    prepared: Prepared,
    draft: ReplyDraft,
    answer: dict[str, Any],
    review: bool,
) -> None:
    """`reply.drafted`: the chat request and response, redacted."""
    await record(
        session,
        actor=draft.requested_by,
        action="reply.drafted",
        target=f"conversation:{draft.conversation_id}",
        org_id=draft.org_id,
        details={
            "reply": str(draft.id),
            "agent": prepared.target.agent_id,
            "request": {
                "message": redact(draft.client_message)[0],
                "message_id": draft.message_id,
                "history": len(prepared.command["history"]),
                "corrections": len(prepared.command["corrections"]),
            },
            "response": {
                "reply": redact(draft.draft)[0],
                "confidence": draft.confidence,
                "risk_level": draft.risk,
                "flag_for_review": draft.flag_for_review,
                "model": str(answer.get("model") or ""),
                "responder": str(answer.get("responder") or ""),
                "corrections_used": [str(c) for c in answer.get("corrections_used") or []],
            },
            "threshold": prepared.threshold,
            "review": review,
        },
    )


async def send(session: AsyncSession, draft: ReplyDraft, text: str, *, by: str) -> None:
    """Append `text` to the conversation as the agent's message; audit `reply.sent`."""
    message = await ConversationRepository(session).add_message(
        Message(
            conversation_id=draft.conversation_id, role="agent", author=draft.agent, content=text
        )
    )
    draft.state, draft.sent_text, draft.sent_message_id = "sent", text, message.id
    await session.flush()
    await record(
        session,
        actor=by,
        action="reply.sent",
        target=f"conversation:{draft.conversation_id}",
        org_id=draft.org_id,
        details={
            "reply": str(draft.id),
            "agent": draft.agent,
            "message_id": message.id,
            "edited": text != draft.draft,
            "confidence": draft.confidence,
        },
    )
    await emit(session, draft.org_id, "reply.sent", _event(draft))


def _event(draft: ReplyDraft) -> dict[str, Any]:
    return {
        "id": f"replies/{draft.id}",
        "conversation_id": str(draft.conversation_id),
        "agent": draft.agent,
        "state": draft.state,
        "confidence": draft.confidence,
        "risk": draft.risk,
    }


async def decide(
    session: AsyncSession, principal: Principal, reply_id: uuid.UUID, body: ReplyDecision
) -> tuple[ReplyDraft, ExpertCorrection | None]:
    """Apply an expert's decision to a waiting draft; the correction it made, if any.
    409 `run_state_conflict` when the draft was decided already."""
    draft = await ReplyRepository(session).get_in(reply_id, principal.org_ids, lock=True)
    if draft is None:
        raise NotFound("no such human task")
    if draft.state != "pending":
        raise RunStateConflict("the draft was already decided", state=draft.state)
    if body.action != "reject" and draft.requested_by == principal.username:
        raise SelfApproval("the requester of a draft cannot send it", reply=str(draft.id))
    draft.decided_by, draft.decided_at = principal.username, datetime.now(UTC)
    await record(
        session,
        actor=principal.username,
        action=f"reply.{body.action}",
        target=f"conversation:{draft.conversation_id}",
        org_id=draft.org_id,
        details={"reply": str(draft.id), "action": body.action, "feedback": body.feedback},
    )
    correction = None
    if body.action == "reject":
        draft.state, draft.feedback = "rejected", body.feedback
        correction = _correction(draft, "reply_rejected", str(body.feedback), principal)
        await emit(session, draft.org_id, "reply.rejected", _event(draft))
    else:
        text = draft.draft if body.action == "approve" else str(body.text)
        await send(session, draft, text, by=principal.username)
        if body.action == "edit" and text != draft.draft:
            correction = _correction(draft, "reply_edit", text, principal)
    if correction is not None:
        correction = await corrections.keep(session, correction)
    await session.flush()
    return draft, correction


def _correction(
    draft: ReplyDraft, kind: str, corrected: str, principal: Principal
) -> ExpertCorrection:
    return ExpertCorrection(
        id=uuid.uuid4(),
        org_id=draft.org_id,
        kind=kind,
        message=draft.client_message,
        draft=draft.draft,
        corrected=corrected,
        note=None,
        source=f"reply:{draft.id}",
        conversation_id=draft.conversation_id,
        by=principal.username,
    )


def read(draft: ReplyDraft, threshold: float | None = None) -> ReplyRead:
    """The API's view of a draft."""
    return ReplyRead(
        id=draft.id,
        queue_id=f"replies/{draft.id}",
        conversation_id=draft.conversation_id,
        agent=draft.agent,
        message_id=draft.message_id,
        draft=draft.draft,
        confidence=draft.confidence,
        risk=draft.risk,
        flag_for_review=draft.flag_for_review,
        state=draft.state,  # type: ignore[arg-type]
        threshold=threshold,
        sent_text=draft.sent_text,
        sent_message_id=draft.sent_message_id,
        feedback=draft.feedback,
        requested_by=draft.requested_by,
        decided_by=draft.decided_by,
        created_at=draft.created_at,
    )
