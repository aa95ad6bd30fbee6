"""`POST /orgs/{org_id}/tasks` (capability `run.control`): a request that names no agent
goes to the org's agent whose specialist fits.

The body is the one of `POST /orgs/{org_id}/agents/{name}/tasks`, and so is the rest of the
path (`platform_api.agents.planning`): the signed plan command, the requester the platform
binds, the audit row `task.plan_requested`. The router adds how it chose
(`routing.service.choose`): on the task, the annotations `humanwork.io/routed-by`
(`keywords`, `llm` or `default`) and `humanwork.io/routing-reason`, which admission lets
only the platform API write; in the audit row, `routedBy` and `routingReason`.
"""

from __future__ import annotations

from typing import Annotated

import httpx
from fastapi import APIRouter, Header

from humanwork_core import keys
from platform_api.agents.commands import org_agent, require_kube
from platform_api.agents.planning import PlannedTask, PlannerDep, PlanRequest, request_plan
from platform_api.auth.dependencies import require_in_org
from platform_api.db import Session
from platform_api.errors import NotFound, error_responses
from platform_api.floor.principal import OrgScope
from platform_api.models import Org
from platform_api.routing.llm import LlmRouter
from platform_api.routing.service import choose, org_candidates
from platform_api.settings import Settings
from platform_api.state import AgentHttp, AppSettings, MaybeKube

router = APIRouter(prefix="/orgs/{org_id}", tags=["agents"])


class RoutedTask(PlannedTask):
    """The task the chosen agent created, and how it was chosen."""

    agent: str
    routedBy: str
    routingReason: str


def _llm(settings: Settings, http: httpx.AsyncClient) -> LlmRouter | None:
    if not settings.router_llm_base_url:
        return None
    return LlmRouter(settings, http)


@router.post(
    "/tasks",
    status_code=201,
    summary="Plan a request with the org's agent that fits it",
    description="Capability `run.control`, in one of the caller's orgs. The same body and "
    "answer as `POST /orgs/{org_id}/agents/{name}/tasks`, plus the agent chosen and why: "
    "the specialists' keywords first, then the LLM when the platform has one "
    "(`HUMANWORK_ROUTER_LLM_BASE_URL`), then the org's only agent without keywords. The "
    "choice is recorded on the task (annotations `humanwork.io/routed-by`, "
    "`humanwork.io/routing-reason`) and in the audit row `task.plan_requested`. 409 "
    "`org_has_no_agent` when the org has no agent that takes work, 409 `routing_ambiguous` "
    "(`details.candidates`) when several fit equally, 422 `no_agent_fits` when none does.",
    responses=error_responses(
        401,
        403,
        404,
        409,
        422,
        502,
        503,
        codes={
            409: ("routing_ambiguous", "several agents fit the request equally; name one"),
            422: ("no_agent_fits", "no agent's specialist fits the request"),
            502: ("agent_unreachable", "the agent did not answer"),
        },
    ),
)
async def route_task(
    body: PlanRequest,
    session: Session,
    maybe_kube: MaybeKube,
    settings: AppSettings,
    http: AgentHttp,
    planner: PlannerDep,
    scope: Annotated[OrgScope, require_in_org("run.control")],
    idempotency_key: Annotated[
        str | None, Header(alias="Idempotency-Key", min_length=1, max_length=128)
    ] = None,
) -> RoutedTask:
    kube = require_kube(maybe_kube, "routing a request")
    org = await session.get(Org, scope.org_id)
    if org is None:
        raise NotFound("no such org")
    choice = await choose(body.request, await org_candidates(kube, org), _llm(settings, http))
    target = await org_agent(session, kube, scope.org_id, choice.agent)
    planned = await request_plan(
        session,
        planner,
        scope,
        target,
        body,
        idempotency_key,
        annotations={keys.ROUTED_BY: choice.by, keys.ROUTING_REASON: choice.reason},
        details={"routedBy": choice.by, "routingReason": choice.reason},
    )
    return RoutedTask(
        **planned.model_dump(),
        agent=target.agent_id,
        routedBy=choice.by,
        routingReason=choice.reason,
    )
