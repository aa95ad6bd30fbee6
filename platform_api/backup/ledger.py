"""After a restore, the proxy's ledger (`tool_calls`) made to agree with the tasks, so that
no approved step reaches its upstream a second time.

- A task re-created from the backup has a new uid, and the ledger keys its steps by uid
  (`agent_api.ledger.step_key`): its rows are moved to the new keys, and a claim that was
  still `started` at backup time becomes `unknown` (the call may have gone through).
- A task that outlived the restore (the API server kept it) may be ahead of the restored
  database: a step it shows running or with an unknown outcome gets an `unknown` row when
  the ledger has none (its next call answers `tool_call_outcome_unknown`, never calls the
  upstream), and a step it shows executed gets a `done` row (a repeat is answered from it).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from humanwork_core.resources import AgenticTask, ExecutionState
from platform_api.agent_api.ledger import request_hash, step_key
from platform_api.agent_api.schemas import ToolCallIn
from platform_api.models import Org, ToolCall

_OPEN = (ExecutionState.RUNNING, ExecutionState.OUTCOME_UNKNOWN)


async def rekey(session: AsyncSession, task: dict[str, Any], old_uid: str) -> int:
    """Move a re-created task's rows from its old uid's keys to its new ones."""
    parsed = AgenticTask.from_wire(task)
    org_id = uuid.UUID(parsed.spec.org_id)
    agent_id = f"{parsed.metadata.namespace}/{parsed.spec.agent_ref.name}"
    moved = 0
    for step in parsed.spec.steps:
        old, new = f"step:{old_uid}/{step.id}", step_key(parsed, step.id)
        row = await session.get(ToolCall, (org_id, agent_id, old))
        if row is None:
            continue
        state = "unknown" if row.state == "started" else row.state
        await session.execute(
            update(ToolCall)
            .where(
                ToolCall.org_id == org_id,
                ToolCall.agent_id == agent_id,
                ToolCall.idempotency_key == old,
            )
            .values(idempotency_key=new, state=state)
        )
        moved += 1
    return moved


def _row(parsed: AgenticTask, step_id: str, state: str, now: datetime) -> ToolCall | None:
    step = parsed.step(step_id)
    if step is None or not step.tool:
        return None
    entry = parsed.current_status().step(step_id)
    params = entry.decision.parameters if entry.decision and entry.decision.parameters else None
    wanted = dict(params if params is not None else step.parameters)
    action = str(wanted.get("action") or "")
    body = ToolCallIn(
        action=action or "unknown",
        params=dict(wanted.get("params") or {}),  # type: ignore[arg-type]
        task=parsed.metadata.name,
        step=step_id,
    )
    return ToolCall(
        org_id=uuid.UUID(parsed.spec.org_id),
        agent_id=f"{parsed.metadata.namespace}/{parsed.spec.agent_ref.name}",
        idempotency_key=step_key(parsed, step_id),
        tool=step.tool,
        action=body.action,
        task=parsed.metadata.name,
        step=step_id,
        request_hash=request_hash(step.tool, body),
        state=state,
        status_code=200 if state == "done" else 0,
        result={"restored": True, "note": "recorded from the task's status after a restore"},
        created_at=now,
        finished_at=now if state == "done" else None,
    )


async def fill(session: AsyncSession, task: dict[str, Any]) -> list[str]:
    """Rows for the steps a surviving task shows started and the ledger lacks."""
    parsed = AgenticTask.from_wire(task)
    now, added = datetime.now(UTC), []
    if await session.get(Org, uuid.UUID(parsed.spec.org_id)) is None:
        return []  # an org the restored database does not have: nothing to call with
    for entry in parsed.current_status().steps:
        run = entry.execution
        if run is None or run.state is ExecutionState.FAILED:
            continue
        key = step_key(parsed, entry.id)
        org_id = uuid.UUID(parsed.spec.org_id)
        agent_id = f"{parsed.metadata.namespace}/{parsed.spec.agent_ref.name}"
        exists = await session.scalar(
            select(ToolCall.state).where(
                ToolCall.org_id == org_id,
                ToolCall.agent_id == agent_id,
                ToolCall.idempotency_key == key,
            )
        )
        if exists is not None:
            continue
        row = _row(parsed, entry.id, "unknown" if run.state in _OPEN else "done", now)
        if row is not None:
            session.add(row)
            added.append(entry.id)
    return added
