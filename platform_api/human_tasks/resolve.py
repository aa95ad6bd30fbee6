"""Resolving a step whose tool call ended with an unknown outcome.

When the tool proxy cannot tell whether an approved side effect happened (a timeout, a
connection broken after the request was sent, a 5xx answer to a write), it keeps the
step's claim in its ledger (`tool_calls`, state `unknown`) and the agent records the
execution `OutcomeUnknown`: the step waits for a human, never for an automatic retry. An
expert with `run.control` (the capability of every decision) checks the upstream and resolves it:

- `applied`: the side effect happened. The ledger row is finished with a result naming
  the resolution, so the agent's next call for the step replays it and the step completes;
- `not_applied`: it did not. The ledger row is released, so the agent may call once more
  (and only once: the next call claims the step again).

The resolution is written into the step's status (`resolution`, a field only the platform
API may write, per the admission policies) for the execution attempt it resolves, and
audited as `task.step.resolved`. As with approvals, the task's requester cannot resolve
its steps (403 `self_approval_forbidden`).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.ext.asyncio import AsyncSession

from humanwork_core import taskflow
from humanwork_core.resources import AgenticTask
from humanwork_core.resources.agentictask import Outcome
from platform_api.agent_api.ledger import claim_is_stale, step_key
from platform_api.human_tasks.moves import StepAt
from platform_api.models import ToolCall


class ResolveBody(BaseModel):
    """An expert's finding on a step whose outcome is unknown."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"outcome": "applied", "note": "the level reads 10 in the Shopify admin"},
                {"outcome": "not_applied", "note": "no change in the inventory history"},
            ]
        },
    )

    outcome: Literal[Outcome.APPLIED, Outcome.NOT_APPLIED] = Field(
        description="`applied` (the side effect happened: the step completes with it) or "
        "`not_applied` (it did not: the agent may call once more)"
    )
    note: str | None = Field(
        default=None, max_length=4096, description="what the expert checked upstream"
    )


class ResolveRead(BaseModel):
    """The recorded resolution."""

    id: str = Field(description="`<namespace>/<task name>/<step id>`")
    outcome: Outcome
    attempt: int = Field(description="the execution attempt resolved")
    ledger: str = Field(
        description="what became of the proxy's claim: `finished` (applied), `released` "
        "(not applied) or `absent` (nothing was claimed)"
    )
    resolution: dict[str, Any]


REQUESTER_REFUSED = "the requester of a task cannot resolve its steps"
"""The 403's message to a task's requester resolving or retrying its steps."""


def _open_claim(row: ToolCall | None, now: datetime, lease_seconds: float) -> bool:
    """A claim an expert may settle: unknown, or started past the configured lease (a
    younger one may be a live call, which a resolution must never race)."""
    if row is None:
        return False
    return row.state == "unknown" or claim_is_stale(row, now, lease_seconds)


async def _settle_ledger(
    session: AsyncSession,
    task: AgenticTask,
    step_id: str,
    body: ResolveBody,
    by: str,
    now: datetime,
    lease_seconds: float,
) -> str:
    """Finish (`applied`) or release (`not_applied`) the step's open claim."""
    agent_id = f"{task.metadata.namespace}/{task.spec.agent_ref.name}"
    key = step_key(task, step_id)
    row = await session.get(
        ToolCall, (uuid.UUID(task.spec.org_id), agent_id, key), with_for_update=True
    )
    if not _open_claim(row, now, lease_seconds):
        return "absent"
    assert row is not None
    if body.outcome is Outcome.NOT_APPLIED:
        await session.delete(row)
        return "released"
    row.state = "done"
    row.status_code = 200
    row.result = {"outcome": Outcome.APPLIED.value, "resolvedBy": by, "note": body.note or ""}
    row.finished_at = now
    return "finished"


async def resolve_unknown(at: StepAt, body: ResolveBody, claim_lease_seconds: float) -> ResolveRead:
    """Record the caller's resolution of the step (see the module docstring). The
    resolution is written under the task's resourceVersion; when another writer (the
    operator ticking the task) changed it meanwhile, the task is read again, a few times."""
    # as with approvals: `not_applied` lets the side effect run again, so the requester
    # does not resolve their own task
    expert = await at.expert("change", REQUESTER_REFUSED)
    now = datetime.now(UTC)
    written = await expert.write(
        lambda task: taskflow.resolve(
            task, at.step_id, body.outcome, by=at.by, note=body.note, now=now
        )
    )
    ledger = await _settle_ledger(
        at.session, written.task, at.step_id, body, at.by, now, claim_lease_seconds
    )
    resolution = written.after.step(at.step_id).resolution
    assert resolution is not None
    facts = {
        "outcome": body.outcome.value,
        "attempt": resolution.attempt,
        "note": body.note,
        "ledger": ledger,
    }
    await expert.audit("task.step.resolved", written, facts)
    return ResolveRead(
        id=at.id,
        outcome=body.outcome,
        attempt=resolution.attempt,
        ledger=ledger,
        resolution=resolution.to_wire(),
    )
