"""`/orgs/{org_id}/agents` and `/orgs/{org_id}/agents/{name}` (capability `agents.manage`,
404 for an org the caller is not a member of): an org's AgentInstances managed through the
platform, each with its health. See `platform_api.agents.manage`."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Response

from platform_api.agents import manage
from platform_api.agents.commands import require_kube
from platform_api.agents.schemas import AGENT_NAME_MAX, AgentCreate, AgentPatch, AgentRead
from platform_api.auth.dependencies import require_in_org
from platform_api.db import Session
from platform_api.errors import error_responses
from platform_api.floor.principal import OrgScope
from platform_api.state import MaybeKube

router = APIRouter(prefix="/orgs/{org_id}/agents", tags=["agents"])

Name = Annotated[str, Path(max_length=AGENT_NAME_MAX, pattern=r"^[a-z]([-a-z0-9]*[a-z0-9])?$")]
Manager = Annotated[OrgScope, require_in_org("agents.manage")]
INVALID = {422: ("agent_spec_invalid", "the agent's spec is not valid")}
HEALTH = (
    "Each agent with its health: phase, desired, existing and ready replicas, conditions, "
    "token expiry, the configuration rolled out against the one the agent reported loaded, "
    "its last signed event (heartbeat) and its open tasks."
)


@router.get(
    "",
    summary="List an org's agents",
    description=f"Capability `agents.manage`. {HEALTH}",
    responses=error_responses(401, 403, 404, 422, 503),
)
async def list_agents(session: Session, maybe_kube: MaybeKube, scope: Manager) -> list[AgentRead]:
    kube = require_kube(maybe_kube, "listing agents")
    org = await manage.org_of(session, scope.org_id)
    return await manage.list_agents(session, kube, org)


@router.post(
    "",
    status_code=201,
    summary="Create an agent",
    description="Capability `agents.manage`. Creates the AgentInstance; its spec is "
    "validated by the CRD's own model (422 `agent_spec_invalid` with `details.errors`), "
    "then by the API server (422 `agent_spec_invalid` with its reason). `spec.orgId` is "
    "always the org's id. 409 `conflict` for a name the org has. Audited `agent.created`.",
    responses=error_responses(401, 403, 404, 409, 422, 503, codes=INVALID),
)
async def create_agent(
    body: AgentCreate, session: Session, maybe_kube: MaybeKube, scope: Manager
) -> AgentRead:
    kube = require_kube(maybe_kube, "creating an agent")
    org = await manage.org_of(session, scope.org_id)
    return await manage.create_agent(session, kube, org, scope.principal.username, body)


@router.get(
    "/{name}",
    summary="Read an agent and its health",
    description=f"Capability `agents.manage`. {HEALTH} 404 for an agent the org does not have.",
    responses=error_responses(401, 403, 404, 422, 503),
)
async def get_agent(
    session: Session, maybe_kube: MaybeKube, scope: Manager, name: Name
) -> AgentRead:
    kube = require_kube(maybe_kube, "reading an agent")
    org = await manage.org_of(session, scope.org_id)
    return await manage.get_agent(session, kube, org, name)


@router.patch(
    "/{name}",
    summary="Change an agent's spec",
    description="Capability `agents.manage`. A JSON merge patch of the spec (null removes a "
    "field; `orgId` is ignored), validated like a new agent's, written only if the agent is "
    "still at `resourceVersion` (the version read now when not given): 409 `conflict` "
    "otherwise. Audited `agent.updated` with the changed fields before and after.",
    responses=error_responses(401, 403, 404, 409, 422, 503, codes=INVALID),
)
async def update_agent(
    body: AgentPatch, session: Session, maybe_kube: MaybeKube, scope: Manager, name: Name
) -> AgentRead:
    kube = require_kube(maybe_kube, "changing an agent")
    org = await manage.org_of(session, scope.org_id)
    return await manage.update_agent(session, kube, org, scope.principal.username, name, body)


@router.delete(
    "/{name}",
    status_code=204,
    summary="Delete an agent",
    description="Capability `agents.manage`. Deletes the AgentInstance: the operator's owner "
    "references remove its pods, Service, token Secret and policies, and its tokens are "
    "refused at once. Audited `agent.deleted`.",
    responses=error_responses(401, 403, 404, 422, 503),
)
async def delete_agent(
    session: Session, maybe_kube: MaybeKube, scope: Manager, name: Name
) -> Response:
    kube = require_kube(maybe_kube, "deleting an agent")
    org = await manage.org_of(session, scope.org_id)
    await manage.delete_agent(session, kube, org, scope.principal.username, name)
    return Response(status_code=204)
