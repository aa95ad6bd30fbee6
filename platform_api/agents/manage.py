"""Managed agents: list, read, create, change and delete an org's
AgentInstances through the platform, audited, with each agent's health.

A spec is validated by the CRD's own model before Kubernetes sees it (422
`agent_spec_invalid`, `details.errors`); what the API server still refuses (its schema,
CEL rules, admission policies) is a 422 `agent_spec_invalid` too, with its reason and
message. A spec beyond the bounds the platform team set for every agent (images, egress,
scheduling, resources: `manage_bounds`) is a 422 `agent_bounds_exceeded` naming the field
and the bound, before the API server sees it. `spec.orgId` is always the org's id. A change
is a JSON merge patch of the spec under a resourceVersion precondition (409 `conflict` when
the agent changed meanwhile).
Audited as `agent.created`, `agent.updated` (before and after of each changed spec field)
and `agent.deleted`.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from humanwork_core.kube_errors import KubeConflict, KubeInvalid, KubeNotFound
from platform_api.agents.manage_bounds import check_bounds
from platform_api.agents.repository import last_heartbeats
from platform_api.agents.schemas import AgentCreate, AgentPatch, AgentRead
from platform_api.agents.status import (
    agent_read,
    changed_fields,
    instance_body,
    merge_patch,
    open_tasks,
    own_patch,
    owned_by,
)
from platform_api.errors import AgentSpecInvalid, Conflict, NotFound
from platform_api.floor.audit.service import record
from platform_api.kube.client import KubeClient
from platform_api.models import Org


def _refused(exc: KubeInvalid) -> AgentSpecInvalid:
    """The API server's refusal (schema, CEL, admission) as the platform's 422."""
    return AgentSpecInvalid(
        "the Kubernetes API refused the agent's spec", reason=exc.reason, apiServer=exc.message
    )


async def _read(kube: KubeClient, org: Org, name: str) -> dict[str, Any]:
    try:
        instance = await kube.get_agent_instance(org.namespace, name)
    except KubeNotFound:
        raise NotFound("no such agent") from None
    if not owned_by(instance, org.id):
        raise NotFound("no such agent")
    return instance


async def _view(
    session: AsyncSession, kube: KubeClient, org: Org, instances: list[dict[str, Any]]
) -> list[AgentRead]:
    beats = await last_heartbeats(session, org.id)
    counts = open_tasks(await kube.list_tasks(org.namespace))
    return [
        agent_read(
            i, beats.get(f"{org.namespace}/{i['metadata']['name']}"), counts[i["metadata"]["name"]]
        )
        for i in instances
    ]


async def list_agents(session: AsyncSession, kube: KubeClient, org: Org) -> list[AgentRead]:
    """The org's agents, by name, with their health."""
    found = [i for i in await kube.list_agent_instances(org.namespace) if owned_by(i, org.id)]
    found.sort(key=lambda i: str(i["metadata"]["name"]))
    return await _view(session, kube, org, found)


async def get_agent(session: AsyncSession, kube: KubeClient, org: Org, name: str) -> AgentRead:
    return (await _view(session, kube, org, [await _read(kube, org, name)]))[0]


async def create_agent(
    session: AsyncSession, kube: KubeClient, org: Org, actor: str, body: AgentCreate
) -> AgentRead:
    """Create the AgentInstance; 409 `conflict` when the org has an agent of that name."""
    manifest = instance_body(org.id, org.namespace, body.name, body.spec)
    await check_bounds(kube, manifest["spec"])
    try:
        made = await kube.create_agent_instance(org.namespace, manifest)
    except KubeConflict:
        raise Conflict("the org has an agent of this name", name=body.name) from None
    except KubeInvalid as exc:
        raise _refused(exc) from None
    await record(
        session,
        actor=actor,
        action="agent.created",
        target=f"agent:{org.namespace}/{body.name}",
        org_id=org.id,
        details={"spec": made.get("spec") or manifest["spec"]},
    )
    return (await _view(session, kube, org, [made]))[0]


async def update_agent(
    session: AsyncSession, kube: KubeClient, org: Org, actor: str, name: str, body: AgentPatch
) -> AgentRead:
    """Merge the change into the spec, validate the result, write it under the
    resourceVersion precondition."""
    current = await _read(kube, org, name)
    before: dict[str, Any] = dict(current.get("spec") or {})
    change = own_patch(body.spec)
    wanted = instance_body(org.id, org.namespace, name, merge_patch(before, change))
    await check_bounds(kube, wanted["spec"])
    version = body.resourceVersion or str(current["metadata"]["resourceVersion"])
    try:
        patched = await kube.patch_agent_instance_spec(org.namespace, name, version, change)
    except KubeConflict:
        raise Conflict(
            "the agent changed since it was read: read it again", reason="resource_version"
        ) from None
    except KubeNotFound:
        raise NotFound("no such agent") from None
    except KubeInvalid as exc:
        raise _refused(exc) from None
    await record(
        session,
        actor=actor,
        action="agent.updated",
        target=f"agent:{org.namespace}/{name}",
        org_id=org.id,
        details=changed_fields(before, dict(patched.get("spec") or {})),
    )
    return (await _view(session, kube, org, [patched]))[0]


async def delete_agent(
    session: AsyncSession, kube: KubeClient, org: Org, actor: str, name: str
) -> None:
    """Delete the AgentInstance (its children and tokens go with it)."""
    await _read(kube, org, name)
    try:
        await kube.delete_agent_instance(org.namespace, name)
    except KubeNotFound:
        raise NotFound("no such agent") from None
    await record(
        session,
        actor=actor,
        action="agent.deleted",
        target=f"agent:{org.namespace}/{name}",
        org_id=org.id,
        details={"agent": f"{org.namespace}/{name}"},
    )


async def org_of(session: AsyncSession, org_id: uuid.UUID) -> Org:
    """The org (membership was checked by the caller); 404 when it is gone."""
    org = await session.get(Org, org_id)
    if org is None:
        raise NotFound("no such org")
    return org
