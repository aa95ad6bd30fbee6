"""One write of the platform's part of a task's status for a step (a resolution, a
reopening, a client's confirmation): computed from the task as read, applied under its
resourceVersion, and, when another writer (the operator ticking the task) changed it
meanwhile, computed again from a fresh read, a few times."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from humanwork_core import taskflow
from humanwork_core.resources import AgenticTask, AgenticTaskStatus
from platform_api.errors import Conflict, PlatformError, RunStateConflict
from platform_api.kube.client import KubeClient, KubeConflict, KubeInvalid

WRITE_ATTEMPTS = 5
"""Fresh reads of the task when a concurrent writer changed it under the write."""


async def write_step_status(
    kube: KubeClient,
    step_id: str,
    read: Callable[[], Awaitable[AgenticTask]],
    move: Callable[[AgenticTask], AgenticTaskStatus],
    what: str,
    refusal: Callable[[taskflow.TaskFlowError], PlatformError] | None = None,
) -> tuple[AgenticTask, AgenticTaskStatus]:
    """Apply `move(task)` (a taskflow move; its refusal answers `refusal(exc)`, by default
    409 `conflict` with `details.reason`); the task read and its status after. A move that
    changes nothing (a repeat) writes nothing. `what` names the write in the errors
    ("resolution")."""
    for _ in range(WRITE_ATTEMPTS):
        task = await read()
        try:
            after = move(task)
        except taskflow.TaskFlowError as exc:
            if refusal is not None:
                raise refusal(exc) from None
            raise Conflict(exc.message, reason=exc.code, step_id=step_id) from None
        if after == task.current_status():
            return task, after
        try:
            await kube.apply_task_status(
                task.metadata.namespace or "",
                task.metadata.name,
                task.metadata.resource_version or "",
                taskflow.owned_status(after, taskflow.Writer.PLATFORM_API),
            )
            return task, after
        except KubeConflict:
            continue
        except KubeInvalid as exc:
            raise RunStateConflict(
                f"the API server refused the {what}", step_id=step_id, reason=exc.message
            ) from None
    raise RunStateConflict(
        f"the task kept changing while writing the {what}; try again", step_id=step_id
    )
