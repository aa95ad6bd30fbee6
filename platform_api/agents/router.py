"""`POST /orgs/{org_id}/agents/{name}/tasks` (capability `run.control`): ask an org's agent
to plan a request. The plan comes back as an AgenticTask waiting in the review queue.

The path (signed command, requester bound by the platform, audit) is
`platform_api.agents.planning`, shared with the router's `POST /orgs/{org_id}/tasks`.

`POST /orgs/{org_id}/agents/{name}/token/revoke` (capability `agents.manage`): revoke the
agent's platform token at once without deleting its AgentInstance. The
platform sets the annotation `humanwork.io/revoke-token`; while it is present the platform
refuses every token of that agent, and the operator revokes the current jti (and any
previous one still in its grace), mints a new token with no grace for the old ones and
removes the annotation. Audited as `agent.token_revoked`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Header, Path
from pydantic import BaseModel, Field

from humanwork_core import keys
from platform_api.agents.commands import org_agent, require_kube
from platform_api.agents.planning import PlannedTask, PlannerDep, PlanRequest, request_plan
from platform_api.auth.dependencies import require_in_org
from platform_api.db import Session
from platform_api.errors import error_responses
from platform_api.floor.audit.service import record
from platform_api.floor.principal import OrgScope
from platform_api.state import MaybeKube

router = APIRouter(prefix="/orgs/{org_id}/agents", tags=["agents"])


REVOKE_TOKEN_ANNOTATION = keys.REVOKE_TOKEN
"""The same annotation the operator acts on (`agent_operator.builders`)."""


class RevokedToken(BaseModel):
    """A revocation the operator is carrying out."""

    agent: str = Field(description="`<namespace>/<name>`")
    revokedJti: str | None = Field(description="the token id current when it was revoked")
    requestedAt: datetime


@router.post(
    "/{name}/tasks",
    status_code=201,
    summary="Ask an agent to plan a request",
    description="Capability `run.control`, in one of the caller's orgs (404 otherwise, and "
    "for an agent the org does not have). The platform sends the agent a signed command; "
    "the agent creates the AgenticTask, whose steps then wait for experts. "
    "`Idempotency-Key` is passed on: a retry names the same task. 409 `agent_not_ready` "
    "for an agent not provisioned yet (no endpoint), 502 `agent_unreachable` when the agent "
    "cannot be reached, 502 `agent_refused` with the agent's error code in `details` when "
    "it refuses.",
    responses=error_responses(
        401,
        403,
        404,
        409,
        422,
        502,
        503,
        codes={
            409: ("agent_not_ready", "the agent has no endpoint yet"),
            502: ("agent_unreachable", "the agent did not answer"),
        },
    ),
)
async def plan_task(
    body: PlanRequest,
    session: Session,
    kube: MaybeKube,
    planner: PlannerDep,
    scope: Annotated[OrgScope, require_in_org("run.control")],
    name: Annotated[str, Path(max_length=253, pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")],
    idempotency_key: Annotated[
        str | None, Header(alias="Idempotency-Key", min_length=1, max_length=128)
    ] = None,
) -> PlannedTask:
    target = await org_agent(session, require_kube(kube, "asking an agent"), scope.org_id, name)
    return await request_plan(session, planner, scope, target, body, idempotency_key)


@router.post(
    "/{name}/token/revoke",
    status_code=202,
    summary="Revoke an agent's token at once",
    description="Capability `agents.manage`, in one of the caller's orgs (404 otherwise, and "
    "for an agent the org does not have). From this moment the platform refuses the agent's "
    "tokens (401 `token_revoked`); the operator then issues a new token into the agent's "
    "Secret, with no grace for the revoked ones. The AgentInstance stays. Audited as "
    "`agent.token_revoked`.",
    responses=error_responses(401, 403, 404, 422, 503),
)
async def revoke_token(
    session: Session,
    maybe_kube: MaybeKube,
    scope: Annotated[OrgScope, require_in_org("agents.manage")],
    name: Annotated[str, Path(max_length=253, pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")],
) -> RevokedToken:
    kube = require_kube(maybe_kube, "revoking a token")
    target = await org_agent(session, kube, scope.org_id, name)
    org, instance = target.org, target.instance
    now = datetime.now(UTC)
    jti = ((instance.get("status") or {}).get("token") or {}).get("jti")
    value = f"{now.isoformat()} {scope.principal.username}"
    await kube.annotate_agent_instance(org.namespace, name, {REVOKE_TOKEN_ANNOTATION: value})
    agent_id = f"{org.namespace}/{name}"
    await record(
        session,
        actor=scope.principal.username,
        action="agent.token_revoked",
        target=f"agent:{agent_id}",
        org_id=org.id,
        details={"agent": agent_id, "jti": jti},
    )
    return RevokedToken(agent=agent_id, revokedJti=jti, requestedAt=now)
