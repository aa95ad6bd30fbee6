"""`POST /orgs/{org_id}/tasks/{name}/steps/{step_id}/confirm` and `/decline`: the initiating
client confirms or declines a high-stakes step of a task it started (see `service`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path
from pydantic import BaseModel, ConfigDict, Field

from platform_api.auth.dependencies import require_in_org
from platform_api.confirmations import service
from platform_api.conversations.taskview import ClientTask
from platform_api.db import Session
from platform_api.errors import NotFound, error_responses
from platform_api.floor.confirmers import CONFIRM
from platform_api.floor.principal import OrgScope
from platform_api.models import Org
from platform_api.state import Kube
from platform_api.steps.http import NAME
from platform_api.tasks.orgs import OrgRef

router = APIRouter(prefix="/orgs/{org_id}/tasks/{name}/steps/{step_id}", tags=["tasks"])

TaskName = Annotated[str, Path(max_length=253, pattern=NAME, description="the task's name")]
StepId = Annotated[str, Path(max_length=63, description="the step's id in the plan")]

CODES = {
    403: ("not_initiating_client", "only the client who initiated the task confirms its steps"),
    409: ("confirmation_stale", "the step changed since the client saw it"),
}
DESCRIPTION = (
    "Capability `steps.confirm` in the org (404 first for an org the caller is not a member "
    "of or a task it may not see). Only the task's initiating client (its requester the "
    "platform vouched for, whose role holds `steps.confirm`) answers; anyone else, an "
    "expert or an admin included, gets 403 `not_initiating_client`. Written into the "
    "step's `status.confirmation` by the platform only (admission refuses any other "
    "writer) and audited. 409 `confirmation_refused` (`details.reason`: "
    "`confirmation_not_required`, `step_declined`, `confirmation_closed`) or "
    "`run_state_conflict` (the task ended). Answers the task as the client sees it."
)


class ConfirmBody(BaseModel):
    """The version of the step the client confirms."""

    model_config = ConfigDict(extra="forbid")

    step_hash: str = Field(
        pattern=r"^[0-9a-f]{64}$",
        description="`steps[].confirmation.step_hash` of the task as shown to the client; "
        "409 `confirmation_stale` when the step changed since (an expert's edit)",
    )


class DeclineBody(BaseModel):
    """Why the client declines: fed back to the agent like a rejection's feedback."""

    model_config = ConfigDict(extra="forbid")

    reason: str = Field(min_length=1, max_length=4096)


async def _org(session: Session, scope: OrgScope) -> OrgRef:
    org = await session.get(Org, scope.org_id)
    if org is None:
        raise NotFound("no such org")
    return OrgRef(org.id, org.namespace)


@router.post(
    "/confirm",
    response_model=ClientTask,
    summary="Confirm a high-stakes step (the initiating client)",
    description=DESCRIPTION + " The step then runs once the experts approved it too "
    "(either order); an expert's later edit voids the confirmation.",
    responses=error_responses(401, 403, 404, 409, 422, 503, codes=CODES),
)
async def confirm_step(
    name: TaskName,
    step_id: StepId,
    body: ConfirmBody,
    session: Session,
    kube: Kube,
    scope: Annotated[OrgScope, require_in_org(CONFIRM)],
) -> ClientTask:
    move = service.ClientMove(name, step_id, confirm=True, step_hash=body.step_hash)
    return await service.answer(session, kube, scope.principal, await _org(session, scope), move)


@router.post(
    "/decline",
    response_model=ClientTask,
    summary="Decline a high-stakes step (the initiating client)",
    description=DESCRIPTION + " A decline halts the task like a rejection; its reason goes "
    "back to the agent.",
    responses=error_responses(401, 403, 404, 409, 422, 503, codes=CODES),
)
async def decline_step(
    name: TaskName,
    step_id: StepId,
    body: DeclineBody,
    session: Session,
    kube: Kube,
    scope: Annotated[OrgScope, require_in_org(CONFIRM)],
) -> ClientTask:
    move = service.ClientMove(name, step_id, confirm=False, reason=body.reason)
    return await service.answer(session, kube, scope.principal, await _org(session, scope), move)
