"""Org use cases: create (row, namespace through the seam, creator's membership, audit)."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from humanwork_core.policy import OrgPolicy
from platform_api.access.principal import OrgScope, Principal
from platform_api.accounts.repository import UserRepository
from platform_api.audit.service import record
from platform_api.errors import Conflict, NotFound
from platform_api.models import Org
from platform_api.orgs.namespaces import OrgNamespaces, namespace_for
from platform_api.orgs.repository import OrgRepository
from platform_api.orgs.schemas import OrgCreate


async def create_org(
    session: AsyncSession, namespaces: OrgNamespaces, principal: Principal, body: OrgCreate
) -> Org:
    """Create an org; its creator becomes a member so it can manage it."""
    orgs = OrgRepository(session)
    if await orgs.slug_taken(body.slug):
        raise Conflict("an org with this slug exists", slug=body.slug)
    org = Org(slug=body.slug, name=body.name, namespace=namespace_for(body.slug))
    if body.id is not None:  # adopting a namespace labelled with this id (issue 15 item 6)
        if await orgs.get_in(body.id, [body.id]) is not None:
            raise Conflict("an org with this id exists", id=str(body.id))
        org.id = body.id
    org = await orgs.add(org)
    await UserRepository(session).add_memberships(principal.user_id, [org.id])
    await namespaces.ensure(org.namespace, org.id)
    await record(
        session,
        actor=principal.username,
        action="org.created",
        target=f"org:{org.slug}",
        org_id=org.id,
        details={"namespace": org.namespace, "name": org.name, "id_given": body.id is not None},
    )
    return org


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
