"""Org use cases: create (a platform administrator's: row, namespace through the seam,
the creator's membership as the org's admin, audit), list, read, set the policy."""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from humanwork_core.policy import OrgPolicy
from platform_api.access_map.repository import AccessMapRepository
from platform_api.agents.manage import create_agent
from platform_api.agents.manage_bounds import check_bounds
from platform_api.agents.status import instance_body
from platform_api.errors import (
    Conflict,
    Forbidden,
    KubernetesUnavailable,
    NotFound,
    ValidationFailed,
)
from platform_api.floor.accounts import UserRepository
from platform_api.floor.audit.service import record
from platform_api.floor.principal import OrgScope, Principal
from platform_api.kube.client import KubeClient
from platform_api.models import Org
from platform_api.orgs.namespaces import OrgNamespaces, namespace_for
from platform_api.orgs.repository import OrgRepository
from platform_api.orgs.schemas import OrgCreate

ORG_ADMIN_ROLE = "admin"
"""The role the platform administrator who creates an org holds in it."""


async def create_org(
    session: AsyncSession,
    namespaces: OrgNamespaces,
    principal: Principal,
    body: OrgCreate,
    kube: KubeClient | None = None,
) -> Org:
    """Create an org; its creator (a platform administrator) becomes a member with role
    `admin` so it can appoint the org's admins. With `body.agent`, its first agent too
    (validated before anything is created)."""
    admin_caps = await AccessMapRepository(session).capabilities(ORG_ADMIN_ROLE)
    if not admin_caps:
        raise ValidationFailed("the access map has no role admin", role=ORG_ADMIN_ROLE)
    orgs = OrgRepository(session)
    if await orgs.slug_taken(body.slug):
        raise Conflict("an org with this slug exists", slug=body.slug)
    org_id, namespace = body.id or uuid.uuid4(), namespace_for(body.slug)
    # adopting a namespace labelled with this id
    if body.id is not None and await orgs.get_in(body.id, [body.id]) is not None:
        raise Conflict("an org with this id exists", id=str(body.id))
    first_agent = await _first_agent(admin_caps, body, kube, org_id, namespace)
    org = await orgs.add(Org(id=org_id, slug=body.slug, name=body.name, namespace=namespace))
    await UserRepository(session).add_memberships(principal.user_id, [org.id], ORG_ADMIN_ROLE)
    await namespaces.ensure(org.namespace, org.id)
    if first_agent is not None and body.agent is not None:
        await create_agent(session, first_agent, org, principal.username, body.agent)
    await record(
        session,
        actor=principal.username,
        action="org.created",
        target=f"org:{org.slug}",
        org_id=org.id,
        details={"namespace": org.namespace, "name": org.name, "id_given": body.id is not None},
    )
    return org


async def _first_agent(
    admin_caps: frozenset[str],
    body: OrgCreate,
    kube: KubeClient | None,
    org_id: uuid.UUID,
    namespace: str,
) -> KubeClient | None:
    """Check the first agent's template before the org exists: the capability (of the
    creator's role in the new org), the Kubernetes API, the spec (the CRD's model) and the
    agent bounds. The client to create it with, or None."""
    if body.agent is None:
        return None
    if "agents.manage" not in admin_caps:
        raise Forbidden("capability agents.manage required", capability="agents.manage")
    if kube is None:
        raise KubernetesUnavailable("creating an agent needs the Kubernetes API")
    manifest = instance_body(org_id, namespace, body.agent.name, body.agent.spec)
    await check_bounds(kube, manifest["spec"])
    return kube


async def list_orgs(session: AsyncSession, principal: Principal) -> list[Org]:
    """The caller's orgs."""
    return await OrgRepository(session).list_in(principal.org_ids)


async def set_policy(session: AsyncSession, scope: OrgScope, policy: OrgPolicy) -> OrgPolicy:
    """Replace the org's approval policy; audited with the policy before and after."""
    org = await get_org(session, scope)
    before = await OrgRepository(session).policy(org.id)
    org.approval_policy = policy.model_dump(mode="json", by_alias=True)
    await session.flush()
    await record(
        session,
        actor=scope.principal.username,
        action="org.policy.updated",
        target=f"org:{org.slug}",
        org_id=org.id,
        details={
            "before": before.model_dump(mode="json", by_alias=True),
            "after": policy.model_dump(mode="json", by_alias=True),
        },
    )
    return policy


async def get_org(session: AsyncSession, scope: OrgScope) -> Org:
    """One of the caller's orgs; 404 for any other."""
    org = await OrgRepository(session).get_in(scope.org_id, scope.principal.org_ids)
    if org is None:
        raise NotFound("no such org")
    return org
