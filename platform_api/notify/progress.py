"""A task's progress told in the conversation it came from: for a task with
`spec.conversationId` (a plan a client's message asked for), each new event of a step (a
decision waits, a step was approved or rejected with its feedback, a step was executed,
failed or ended with an unknown outcome, each with its result in plain language) becomes
a system message of that conversation, with `meta` `{"event", "task", "step", ...}` for
the portal. It is written in the transaction that records the event, and only when the
event log took the event as new, so a relist, a restart or a second replica never tells
it twice. How the request ended is told by `watch._conclude` (once, as before).

`message_for` is pure; `tell` writes."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.notify import events
from platform_api.notify.repository import EventRepository


def _name(payload: dict[str, Any]) -> str:
    return str(payload.get("task_id") or "").rsplit("/", 1)[-1]


def message_for(event: events.Event) -> tuple[str, dict[str, Any]] | None:
    """The text and meta of the conversation's system message for `event`, or None."""
    p = event.payload
    step = str(p.get("step_description") or p.get("step_id") or "")
    meta: dict[str, Any] = {"task": _name(p), "step": p.get("step_id")}
    if event.event == events.DECISION_NEEDED:
        return f"The step “{step}” waits for an expert's review.", {
            "event": "step_waiting",
            **meta,
        }
    if event.event == events.DECIDED and p.get("verdict") != "reject":
        return f"An expert approved the step “{step}”.", {"event": "step_approved", **meta}
    if event.event == events.DECIDED:
        feedback = str(p.get("feedback") or "")
        text = f"An expert rejected the step “{step}”" + (f": {feedback}" if feedback else ".")
        return text, {"event": "step_rejected", **meta, "feedback": feedback or None}
    if event.event in _RUNS:
        return _run_message(event.event, step, p.get("result"), meta)
    return None


_RUNS = {
    events.STEP_EXECUTED: ("The step “{step}” was carried out", "Result"),
    events.STEP_FAILED: ("The step “{step}” failed", "Reason"),
    events.STEP_OUTCOME_UNKNOWN: (
        "The step “{step}” ran, but whether it took effect is not known yet; an expert is checking",
        "What the agent saw",
    ),
}
"""How the end of a step's run is told, and what its result is called."""


def _run_message(
    event: str, step: str, result: object, meta: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """The message of a step's finished run, with its (already redacted) result."""
    said, label = _RUNS[event]
    text = said.format(step=step) + "."
    summary = result if isinstance(result, str) and result else None
    if summary is not None:
        text += f" {label}: {summary}"
    return text, {"event": event, **meta, "result": summary}


async def tell(session: AsyncSession, org_id: uuid.UUID, event: events.Event) -> None:
    """The system message of `event` in its task's conversation (none without one)."""
    conversation = event.payload.get("conversation_id")
    found = message_for(event) if conversation else None
    if found is None:
        return
    try:
        cid = uuid.UUID(str(conversation))
    except ValueError:
        return
    text, meta = found
    await EventRepository(session).tell_conversation(cid, org_id, text, meta)
