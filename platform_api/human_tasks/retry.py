"""Retrying a step whose tool call failed.

A step whose tool call failed (the upstream refused it, answered 5xx to a read, timed out
before sending, the proxy refused it) ends `Failed` with the reason, and so does its task.
An expert with the capability that decides (`run.control`) may run it once more, but only
where the action catalog says the action is safe to retry (`retry_safe`: every read, and
writes that set an absolute value); a step whose outcome is unknown is resolved instead
(`human_tasks.resolve`), never retried blindly.

The retry is written into the step's status (`resolution`, outcome `retry`, for the failed
attempt; a field only the platform API may write) after the same approved-step check as
every execution (`taskflow.retry`); the operator then moves the task back to InProgress and
the agent runs the step again (attempt n+1). The proxy's stored refusal for the step is
released so that the call reaches the upstream again; a stored success is kept (the retry
replays it). Audited as `task.step.retried`; the task's requester cannot retry its steps
(403 `self_approval_forbidden`), as with approvals.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.ext.asyncio import AsyncSession

from humanwork_core import taskflow
from humanwork_core.resources import AgenticTask
from platform_api.agent_api.ledger import step_key
from platform_api.human_tasks.moves import StepAt
from platform_api.human_tasks.resolve import REQUESTER_REFUSED
from platform_api.models import ToolCall


class RetryBody(BaseModel):
    """An expert's retry of a failed step."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"note": "the store was in maintenance; it is back"}]},
    )

    note: str | None = Field(
        default=None, max_length=4096, description="why the expert runs the step again"
    )


class RetryRead(BaseModel):
    """The recorded retry."""

    id: str = Field(description="`<namespace>/<task name>/<step id>`")
    attempt: int = Field(description="the failed execution attempt retried")
    ledger: str = Field(
        description="what became of the proxy's record of the failed call: `released` (a "
        "stored refusal: the next call reaches the upstream) or `absent`"
    )
    resolution: dict[str, Any]


def ledger_keys(task: AgenticTask, step_id: str) -> tuple[str, ...]:
    """The proxy's keys a step's calls may be recorded under: the approved step's (a write)
    and the agent's own step key (a read)."""
    return (step_key(task, step_id), f"{task.metadata.uid or task.metadata.name}/{step_id}")


async def release_refusals(session: AsyncSession, task: AgenticTask, step_id: str) -> str:
    """Delete the step's stored refusals (`failed` rows) so that the retry's call goes
    upstream again; `released` or `absent`."""
    agent_id = f"{task.metadata.namespace}/{task.spec.agent_ref.name}"
    released = "absent"
    for key in ledger_keys(task, step_id):
        row = await session.get(
            ToolCall, (uuid.UUID(task.spec.org_id), agent_id, key), with_for_update=True
        )
        if row is not None and row.state == "failed":
            await session.delete(row)
            released = "released"
    return released


async def retry_failed(at: StepAt, body: RetryBody) -> RetryRead:
    """Record the caller's retry of the failed step (see the module docstring)."""
    expert = await at.expert("change", REQUESTER_REFUSED)
    now = datetime.now(UTC)
    written = await expert.write(
        lambda task: taskflow.retry(task, at.step_id, by=at.by, note=body.note, now=now)
    )
    ledger = await release_refusals(at.session, written.task, at.step_id)
    resolution = written.after.step(at.step_id).resolution
    assert resolution is not None
    facts = {"attempt": resolution.attempt, "note": body.note, "ledger": ledger}
    await expert.audit("task.step.retried", written, facts)
    return RetryRead(
        id=at.id, attempt=resolution.attempt, ledger=ledger, resolution=resolution.to_wire()
    )
