"""Writing a client's confirmation: the platform records which steps need one when it first
sees a task (`require`), and the initiating client confirms or declines a step
(`answer`). Every write goes through the one write of every move of a step (`steps.write`:
computed from the task as read, applied under its resourceVersion, recomputed on a
conflict), is a `taskflow` move, and is audited in the one shape (`step.confirm`,
`step.decline`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession

from humanwork_core import taskflow
from humanwork_core.resources import AgenticTask, AgenticTaskStatus
from platform_api.conversations.taskview import ClientTask, client_task
from platform_api.errors import NotFound, NotInitiatingClient, PlatformError
from platform_api.floor.confirmers import steps_to_confirm
from platform_api.floor.principal import Principal
from platform_api.kube.client import KubeClient, KubeError
from platform_api.models import Org
from platform_api.steps.audit import MoveRecord, audit
from platform_api.steps.refusals import Answer
from platform_api.steps.write import StepWrite, write_move
from platform_api.tasks.orgs import OrgRef
from platform_api.tasks.service import read_task


def _write(kube: KubeClient, org: OrgRef, name: str, step_id: str) -> StepWrite:
    """How a confirmation is written: refusals answered by kind (`confirmation_refused`,
    `confirmation_stale`, ...)."""
    return StepWrite(
        kube, step_id, "confirmation", lambda: read_task(kube, org, name), answer=Answer.BY_KIND
    )


async def require(
    session: AsyncSession, kube: KubeClient, org_id: uuid.UUID, task: AgenticTask
) -> AgenticTask:
    """Record a waiting confirmation on each step the task's initiating client must confirm
    (`floor.confirmers.steps_to_confirm`); the task as it is after (unchanged when none is
    needed)."""
    _client, step_ids = await steps_to_confirm(session, org_id, task)
    if not step_ids:
        return task
    org = OrgRef(org_id, task.metadata.namespace or "")
    first = sorted(step_ids)[0]
    written = await write_move(
        _write(kube, org, task.metadata.name, first),
        lambda current: taskflow.require_confirmation(current, sorted(step_ids)),
    )
    return written.task.model_copy(update={"status": written.after})


async def require_quietly(
    session: AsyncSession, kube: KubeClient, org_id: uuid.UUID, namespace: str, name: str
) -> bool:
    """`require` for the task `namespace/name` where a failure must not fail the caller
    (the plan request answered already): False when it could not be written. The tool proxy
    still refuses an unconfirmed step, from the same rules."""
    try:
        task = await read_task(kube, OrgRef(org_id, namespace), name)
        await require(session, kube, org_id, task)
    except (PlatformError, KubeError, ValueError):
        return False
    return True


@dataclass(frozen=True)
class ClientMove:
    """The client's word on one step."""

    name: str
    step_id: str
    confirm: bool
    step_hash: str | None = None
    reason: str | None = None


async def _judge(
    session: AsyncSession, principal: Principal, org_id: uuid.UUID, task: AgenticTask, step: str
) -> frozenset[str]:
    """The steps to confirm, when `principal` is the task's initiating client; else 404
    (a client who may not see the task) or 403 `not_initiating_client`."""
    if task.step(step) is None:
        raise NotFound("the plan has no such step", step_id=step)
    client, step_ids = await steps_to_confirm(session, org_id, task)
    if client == principal.username:
        return step_ids
    org = await session.get(Org, org_id)
    sees = principal.can_in(org_id, "tasks.read") or bool(
        org is not None and org.clients_share_conversations
    )
    if not sees:
        raise NotFound("no such task")
    raise NotInitiatingClient(
        "only the client who initiated the task confirms or declines its steps", step_id=step
    )


def _move(
    move: ClientMove, by: str, step_ids: frozenset[str], now: datetime
) -> Callable[[AgenticTask], AgenticTaskStatus]:
    def apply(task: AgenticTask) -> AgenticTaskStatus:
        # the record the platform writes when it first sees the task, if it could not
        required = taskflow.require_confirmation(task, sorted(step_ids & {move.step_id}))
        current = task.model_copy(update={"status": required})
        if move.confirm:
            return taskflow.confirm(
                current, move.step_id, by=by, step_hash=move.step_hash or "", now=now
            )
        return taskflow.decline(current, move.step_id, by=by, reason=move.reason or "", now=now)

    return apply


async def answer(
    session: AsyncSession, kube: KubeClient, principal: Principal, org: OrgRef, move: ClientMove
) -> ClientTask:
    """Record the initiating client's confirmation or decline (see the module docstring);
    the task as the client now sees it."""
    first = await read_task(kube, org, move.name)
    step_ids = await _judge(session, principal, org.id, first, move.step_id)
    now = datetime.now(UTC)
    written = await write_move(
        _write(kube, org, move.name, move.step_id), _move(move, principal.username, step_ids, now)
    )
    task, after = written.task, written.after
    if written.repeat:  # a repeat of what is recorded: nothing new to audit
        return client_task(task, now)
    entry = after.step(move.step_id)
    facts = {
        "step_hash": entry.confirmation.step_hash if entry.confirmation else None,
        "reason": move.reason,
    }
    action = "step.confirm" if move.confirm else "step.decline"
    record = MoveRecord(
        principal.username,
        action,
        org.namespace,
        move.name,
        org.id,
        move.step_id,
        facts,
        task.metadata.uid,
    )
    await audit(session, record)
    return client_task(task.model_copy(update={"status": after}), now)
