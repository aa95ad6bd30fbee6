"""What the review queue shows of a step whose outcome is unknown.

A step's approved tool call reached the upstream and its answer was lost (a timeout, a
connection reset after sending, a 5xx to a write): the proxy keeps its claim in the ledger
(`tool_calls`, state `unknown`) and the step waits for an expert (`human_tasks.resolve`).
To decide, the expert needs what the platform knows: when the request was sent (the
claim's time), the upstream (the step's tool and action), the key it carried, the attempt,
what the read-back found (`agent_api.readback`, recorded on the call's `tool.called` audit
row), and the two choices with what each does. Built from the ledger and the audit log,
read-only.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from humanwork_core import taskflow
from humanwork_core.resources import AgenticTask
from platform_api.agent_api import readback
from platform_api.agent_api.ledger import claim_is_stale, step_key
from platform_api.human_tasks.schemas import ResolveChoice, UnknownOutcomeRead
from platform_api.models import AuditRecord, ToolCall

AUDIT_LOOKBACK = 200
"""The newest `tool.called` rows of the step's tool and action searched for its key."""

CHOICES = [
    ResolveChoice(
        outcome="applied",
        label="Mark as executed",
        effect="Records that the side effect happened: the proxy's claim is finished with "
        "your note, the agent's next call for the step is answered from it without reaching "
        "the upstream, and the step completes. Audited as task.step.resolved.",
    ),
    ResolveChoice(
        outcome="not_applied",
        label="Mark as not executed and retry",
        effect="Records that nothing happened upstream: the proxy's claim is released and "
        "the agent calls the upstream once more, with the same idempotency key (once: that "
        "call claims the step again). If the side effect did happen, it happens twice: "
        "check the upstream first. Audited as task.step.resolved.",
    ),
]

_READ_BACK_WORDS = {
    "inconclusive": "The upstream was read after the lost answer and does not show the "
    "approved value: the write may not have happened, or something else changed it since.",
    "confirmed": "The upstream was read and holds exactly the approved value.",
    "not_available": "This action cannot be read back (its effect cannot be told apart from "
    "other changes): check the upstream yourself.",
    "not_recorded": "No tool call of this step is in the audit log: nothing was read back.",
}


def _ledger_state(row: ToolCall | None, now: datetime, lease_seconds: float) -> str:
    if row is None:
        return "absent"
    if row.state == "started":
        return "stale" if claim_is_stale(row, now, lease_seconds) else "in_flight"
    return row.state if row.state in ("unknown", "done", "failed") else "unknown"


async def _last_call(
    session: AsyncSession, org_id: uuid.UUID, tool: str, action: str, key: str
) -> dict[str, Any] | None:
    """The details of the newest `tool.called` row that carried the step's key."""
    rows = await session.scalars(
        select(AuditRecord.details)
        .where(
            AuditRecord.org_id == org_id,
            AuditRecord.action == "tool.called",
            AuditRecord.target == f"tool:{tool}.{action}",
        )
        .order_by(AuditRecord.id.desc())
        .limit(AUDIT_LOOKBACK)
    )
    for details in rows:
        if isinstance(details, dict) and details.get("idempotency_key") == key:
            return details
    return None


async def unknown_outcome(
    session: AsyncSession,
    org_id: uuid.UUID,
    task: AgenticTask,
    step_id: str,
    claim_lease_seconds: float,
) -> UnknownOutcomeRead:
    """What is known of the step's unknown outcome (the step must be in that state); a
    claim is judged against the platform's configured lease, as the proxy judges it."""
    step = task.step(step_id)
    assert step is not None
    entry = task.current_status().step(step_id)
    run = entry.execution
    action = taskflow.effective_parameters(step, entry).get("action")
    operation = action if isinstance(action, str) else None
    key = step_key(task, step_id)
    agent_id = f"{task.metadata.namespace}/{task.spec.agent_ref.name}"
    row = await session.get(ToolCall, (org_id, agent_id, key))
    call = (
        await _last_call(session, org_id, step.tool, operation, key)
        if step.tool and operation
        else None
    )
    if (step.tool, operation) not in readback.CHECKS:
        found = "not_available"
    elif call is not None and call.get("read_back") in ("inconclusive", "confirmed"):
        found = str(call["read_back"])
    else:
        found = "not_recorded"
    return UnknownOutcomeRead(
        request_sent_at=row.created_at if row is not None else run.started_at if run else None,
        integration=step.tool,
        operation=operation,
        idempotency_key=key,
        attempt=run.attempt if run is not None else 0,
        ledger=_ledger_state(row, datetime.now(UTC), claim_lease_seconds),  # type: ignore[arg-type]
        upstream_error=call.get("upstream_error") if call is not None else None,
        read_back=found,  # type: ignore[arg-type]
        read_back_detail=_READ_BACK_WORDS[found],
        choices=list(CHOICES),
    )
