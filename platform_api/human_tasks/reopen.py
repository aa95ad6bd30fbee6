"""Reopening a step whose decision expired (seed 001: "if you were a
minute too late, you get 'task expired' and the run stays blocked for a fresh escalation").

Under the task policy's `onExpiry: AwaitReopen` (the default) a decision that ran out of
time leaves the task waiting on that step, undecidable (`human_task_expired`). An expert
with `run.control` (the capability of every decision) reopens it with a new deadline:
the platform writes the step's `reopened` (a status field only the platform API may
write, per the admission policies) and the operator gives the step that deadline. Audited
as `task.step.reopened`. A step that has not expired, a task whose policy says
`onExpiry: End` (it ended in phase Expired), or a step the task does not wait on answers
409 `conflict` with `details.reason`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from humanwork_core import taskflow
from humanwork_core.resources import AgenticTask, AgenticTaskStatus
from platform_api.human_tasks.moves import StepAt


class ReopenBody(BaseModel):
    """A new deadline for a step whose decision expired."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"deadline_seconds": 3600, "reason": "the lead is back; decide today"}]
        },
    )

    deadline_seconds: int | None = Field(
        default=None,
        ge=60,
        le=30 * 86400,
        description="the new deadline, in seconds from now (default: the task policy's "
        "decisionDeadlineSeconds, at least 60)",
    )
    reason: str | None = Field(default=None, max_length=4096, description="why it is reopened")


class ReopenRead(BaseModel):
    """The recorded reopening."""

    id: str = Field(description="`<namespace>/<task name>/<step id>`")
    deadline: datetime = Field(description="when the reopened decision is due")
    reopened: dict[str, Any]


async def reopen_expired(at: StepAt, body: ReopenBody) -> ReopenRead:
    """Reopen the expired step for the caller (see the module docstring); audited."""
    expert = await at.expert("reopening")
    now = datetime.now(UTC)

    def move(task: AgenticTask) -> AgenticTaskStatus:
        seconds = body.deadline_seconds or max(60, task.spec.policy.decision_deadline_seconds)
        return taskflow.reopen(
            task, at.step_id, now, by=at.by, deadline_seconds=seconds, reason=body.reason
        )

    written = await expert.write(move)
    entry = written.after.step(at.step_id)
    reopened, deadline = entry.reopened, taskflow.reopened_deadline(entry)
    assert reopened is not None and deadline is not None
    facts = {
        "deadline": deadline.isoformat(),
        "deadline_seconds": reopened.deadline_seconds,
        "count": reopened.count,
        "reason": body.reason,
    }
    await expert.audit("task.step.reopened", written, facts)
    return ReopenRead(id=at.id, deadline=deadline, reopened=reopened.to_wire())
