"""`/orgs`: create an org (platform administrators), list the caller's orgs, read one,
read and set its approval policy (`policy.manage`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, status

from humanwork_core.policy import OrgPolicy
from platform_api.auth.dependencies import require, require_in_org, require_platform_admin
from platform_api.db import Session
from platform_api.errors import error_responses
from platform_api.floor.principal import OrgScope, Principal
from platform_api.orgs import service
from platform_api.orgs.namespaces import Namespaces
from platform_api.orgs.repository import OrgRepository
from platform_api.orgs.schemas import OrgCreate, OrgRead
from platform_api.state import MaybeKube

router = APIRouter(prefix="/orgs", tags=["orgs"])


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=OrgRead,
    summary="Create an org",
    description="Platform administrators only (403 `platform_admin_required` for anyone "
    "else, an org's admin included). Creates the org with namespace `org-<slug>` (through "
    "the `OrgNamespaces` seam) and makes the caller a member with role `admin`. With "
    "`agent` (the role `admin` holding `agents.manage`), its first AgentInstance too, "
    "from that template; a bad "
    "template is 422 `agent_spec_invalid` and creates nothing. With `id`, adopts a "
    "namespace `org-<slug>` created outside the platform whose `humanwork.io/org-id` label "
    "is that id (409 `conflict` when it is labelled for another org or not at all, or the "
    "id is taken).",
    responses=error_responses(401, 403, 409, 422),
)
async def create_org(
    body: OrgCreate,
    session: Session,
    namespaces: Namespaces,
    kube: MaybeKube,
    principal: Annotated[Principal, require_platform_admin()],
) -> OrgRead:
    org = await service.create_org(session, namespaces, principal, body, kube)
    read = OrgRead.model_validate(org)
    if body.agent is not None:
        read.agent = f"{org.namespace}/{body.agent.name}"
    return read


@router.get(
    "",
    response_model=list[OrgRead],
    summary="List my orgs",
    description="Capability `tasks.read`. The orgs the caller is a member of.",
    responses=error_responses(401, 403),
)
async def list_orgs(
    session: Session, principal: Annotated[Principal, require("tasks.read")]
) -> list[OrgRead]:
    return [OrgRead.model_validate(o) for o in await service.list_orgs(session, principal)]


@router.get(
    "/{org_id}",
    response_model=OrgRead,
    summary="Read an org",
    description="Capability `tasks.read`. 404 for an org the caller is not a member of.",
    responses=error_responses(401, 403, 404, 422),
)
async def get_org(
    session: Session, scope: Annotated[OrgScope, require_in_org("tasks.read")]
) -> OrgRead:
    return OrgRead.model_validate(await service.get_org(session, scope))


@router.get(
    "/{org_id}/policy",
    response_model=OrgPolicy,
    summary="Read an org's approval policy",
    description="Capability `tasks.read`. Whether low-risk read-only steps may auto-approve "
    "and the least quorum per risk; an org that set none has the strict default (no "
    "auto-approval, one approval, two for critical). A task's own policy can only be stricter.",
    responses=error_responses(401, 403, 404, 422),
)
async def get_policy(
    session: Session, scope: Annotated[OrgScope, require_in_org("tasks.read")]
) -> OrgPolicy:
    org = await service.get_org(session, scope)
    return await OrgRepository(session).policy(org.id)


@router.put(
    "/{org_id}/policy",
    response_model=OrgPolicy,
    summary="Set an org's approval policy",
    description="Capability `policy.manage` (agents and requesters never hold it). Replaces "
    "the policy; applies to every later decision and auto-approval at once; audited "
    "(`org.policy.updated`, before and after).",
    responses=error_responses(401, 403, 404, 422),
)
async def put_policy(
    body: OrgPolicy,
    session: Session,
    scope: Annotated[OrgScope, require_in_org("policy.manage")],
) -> OrgPolicy:
    return await service.set_policy(session, scope, body)
