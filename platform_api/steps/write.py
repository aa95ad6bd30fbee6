"""The one optimistic-concurrency write of a move: the platform's part of a task's status,
computed by the move from the task as read and applied by server-side apply under the
resourceVersion read. When another writer changed the task in between (the operator's tick,
another expert, another replica), the write is refused and the move computed again from a
fresh read, `attempts` times at most; nothing is ever overwritten.

A move may first be judged on a copy that can lag (the watch's): a refusal, a repeat or a
refused write on that copy is judged again on a fresh read, without counting. A move that
changes nothing (a repeat) writes nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from humanwork_core import taskflow
from humanwork_core.resources import AgenticTask, AgenticTaskStatus
from platform_api import faultpoints
from platform_api.errors import NotFound, RunStateConflict
from platform_api.kube.client import KubeClient, KubeConflict, KubeInvalid, KubeNotFound
from platform_api.steps.refusals import Answer, refused

WRITE_ATTEMPTS = 5
"""Fresh reads of the task when a concurrent writer changed it under the write."""

Move = Callable[[AgenticTask], AgenticTaskStatus]
"""A move on one step: the task's status after it (or the contract's `TaskFlowError`)."""


class StaleWrite(RunStateConflict):
    """The task kept changing under the write: every attempt was refused."""


@dataclass(frozen=True)
class Written:
    """What the write did: the task the move was judged on, its status after the move, and
    the API server's answer (None when the move changed nothing: a repeat)."""

    task: AgenticTask
    after: AgenticTaskStatus
    wire: dict[str, Any] | None

    @property
    def repeat(self) -> bool:
        return self.wire is None


@dataclass(frozen=True)
class StepWrite:
    """How one move is written."""

    kube: KubeClient
    step_id: str
    what: str
    """The write's name in its errors ("decision", "resolution")."""
    read: Callable[[], Awaitable[AgenticTask]]
    """The task as it is now."""
    answer: Answer = Answer.CONFLICT
    attempts: int = WRITE_ATTEMPTS
    check: Callable[[AgenticTask], Awaitable[None]] | None = None
    """Run on every copy before the move (a missing step, the requester's own task)."""
    exhausted: str | None = None
    """The message when every attempt was refused (a default names `what`)."""
    faults: str | None = None
    """The prefix of the fault points around the write (`<faults>.before_status_write`)."""


async def read_in_org(
    kube: KubeClient, org_id: uuid.UUID, namespace: str, name: str
) -> AgenticTask:
    """The task as it is now; 404 when it does not exist or belongs to another org."""
    try:
        task = AgenticTask.from_wire(await kube.get_task(namespace, name))
    except KubeNotFound:
        raise NotFound("no such task") from None
    if task.spec.org_id != str(org_id):
        raise NotFound("no such task")
    return task


async def write_move(how: StepWrite, move: Move, first: AgenticTask | None = None) -> Written:
    """Write `move` (see the module docstring), judged first on `first` when given."""
    conflicts = 0
    while True:
        stale = first is not None
        task = first if first is not None else await how.read()
        first = None
        if how.check is not None:
            await how.check(task)
        try:
            after = move(task)
        except taskflow.TaskFlowError as exc:
            if stale:  # the copy may lag: judge on the current version
                continue
            raise refused(exc, how.answer, how.step_id) from None
        if after == task.current_status():
            if stale:  # a repeat is answered from the current version
                continue
            return Written(task, after, None)
        try:
            return Written(task, after, await _apply(how, task, after))
        except KubeConflict:
            if stale:
                continue
            conflicts += 1
            if conflicts >= how.attempts:
                message = how.exhausted or (
                    f"the task kept changing while writing the {how.what}; try again"
                )
                raise StaleWrite(message, step_id=how.step_id) from None


async def _apply(how: StepWrite, task: AgenticTask, after: AgenticTaskStatus) -> dict[str, Any]:
    """Apply the platform's part of `after` under the resourceVersion of `task`."""
    if how.faults is not None:
        faultpoints.reach(f"{how.faults}.before_status_write")
    try:
        written = await how.kube.apply_task_status(
            task.metadata.namespace or "",
            task.metadata.name,
            task.metadata.resource_version or "",
            taskflow.owned_status(after, taskflow.Writer.PLATFORM_API),
        )
    except KubeNotFound:
        raise NotFound("no such task") from None
    except KubeInvalid as exc:
        raise RunStateConflict(
            f"the API server refused the {how.what}", step_id=how.step_id, reason=exc.message
        ) from None
    if how.faults is not None:
        faultpoints.reach(f"{how.faults}.after_status_write")
    return written
