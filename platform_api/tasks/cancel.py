"""`POST /agentic/tasks/{namespace}/{name}/cancel` (capability `run.control`): stop a task
for good.

Only the operator writes a task's phase, so the platform records the request as the
annotation `humanwork.io/cancel-requested` (who and when) and the operator moves the task
to `Cancelled` at once; the agent, seeing a terminal task, runs none of its remaining
steps, and a step already running may still report how it ended. From the moment the
annotation is written the tool proxy refuses every side-effecting call for the task (409
`task_cancel_requested`), whether or not the operator has acted yet. Audited as
`task.cancel_requested`. A task that already ended answers 409 `run_state_conflict`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Path
from pydantic import BaseModel, Field

from humanwork_core import keys, taskflow
from platform_api.auth.dependencies import require
from platform_api.db import Session
from platform_api.errors import error_responses
from platform_api.floor.principal import Principal
from platform_api.state import Kube
from platform_api.steps.audit import MoveRecord, audit
from platform_api.steps.http import NAME, NAMESPACE, UNAVAILABLE
from platform_api.steps.refusals import Answer, refused
from platform_api.tasks import service

CANCEL_ANNOTATION = keys.CANCEL_REQUESTED

router = APIRouter(prefix="/agentic/tasks", tags=["tasks"])


class CancelRequested(BaseModel):
    """A cancellation the operator carries out at once."""

    id: str = Field(description="`<namespace>/<name>`")
    requestedBy: str
    requestedAt: datetime


@router.post(
    "/{namespace}/{name}/cancel",
    status_code=202,
    summary="Cancel a task",
    description="Capability `run.control`. The operator moves the task to `Cancelled` "
    "(phase written by the operator only); no further step runs, and the tool proxy refuses "
    "the task's calls at once (`task_cancel_requested`). 409 `run_state_conflict` "
    "when the task already ended; 404 for another org's task.",
    responses=error_responses(
        401,
        403,
        404,
        409,
        422,
        503,
        codes={409: ("run_state_conflict", "the task is already Completed"), **UNAVAILABLE},
    ),
)
async def cancel_task(
    session: Session,
    kube: Kube,
    principal: Annotated[Principal, require("run.control")],
    namespace: Annotated[str, Path(max_length=63, pattern=NAMESPACE)],
    name: Annotated[str, Path(max_length=253, pattern=NAME)],
) -> CancelRequested:
    org = await service.org_of_namespace(session, principal, namespace)
    task, archived = await service.read_or_archived(session, kube, org, name)
    now = datetime.now(UTC)
    try:
        if archived:
            raise taskflow.TaskTerminal("the task ended and was archived")
        taskflow.cancel(task, now)  # refuses a task that already ended
    except taskflow.TaskFlowError as exc:
        raise refused(exc, Answer.RUN_STATE) from None
    await kube.annotate_task(
        namespace, name, {CANCEL_ANNOTATION: f"{principal.username} {now.isoformat()}"}
    )
    phase = task.current_status().phase or taskflow.derive_phase(task, now)
    await audit(
        session,
        MoveRecord(
            principal.username,
            "task.cancel_requested",
            namespace,
            name,
            org.id,
            None,
            {"phase": phase.value},
            kind="task",
        ),
    )
    return CancelRequested(
        id=f"{namespace}/{name}", requestedBy=principal.username, requestedAt=now
    )
