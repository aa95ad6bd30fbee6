"""Deactivating an org (UC-20) and reactivating it.

Deactivation first marks the org deactivated and keeps its agents' specs, in a transaction
of its own committed before anything else: from that moment the platform refuses every
token of the org's agents (`agent_api.auth` reads the flag from the database on every
request, on every replica) and every change its users ask for (`deactivation.guard`). Then it
asks the operator to cancel each open task (the annotation `humanwork.io/cancel-requested`,
with the reason) and deletes every AgentInstance of the org (the operator's owner
references remove pods, Services, token Secrets and policies). The audit log and the
archive stay readable. Running it again finishes a teardown that failed half-way.

Reactivation clears the flag and, unless told not to, recreates the deleted agents from
their kept specs (validated again by the CRD's model). Audited `org.deactivated` and
`org.reactivated`.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from humanwork_core import keys
from humanwork_core.kube_errors import KubeConflict, KubeNotFound
from platform_api.agents.status import instance_body, open_tasks_of, owned_by
from platform_api.deactivation.schemas import OrgLifecycle
from platform_api.errors import Conflict, KubernetesUnavailable, NotFound
from platform_api.floor.audit.service import record
from platform_api.kube.client import KubeClient
from platform_api.models import Org


def _kept(instance: dict[str, Any]) -> dict[str, Any]:
    return {"name": instance["metadata"]["name"], "spec": dict(instance.get("spec") or {})}


def _merge(old: list[dict[str, Any]] | None, new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_name = {a["name"]: a for a in old or []}
    by_name.update({a["name"]: a for a in new})
    return [by_name[n] for n in sorted(by_name)]


async def _mark(
    sessions: async_sessionmaker[AsyncSession],
    org_id: Any,
    actor: str,
    now: datetime,
    agents: list[dict[str, Any]],
) -> Org:
    """Set the flag and keep the specs, committed at once."""
    async with sessions() as session, session.begin():
        org = await session.get(Org, org_id, with_for_update=True)
        if org is None:
            raise NotFound("no such org")
        if org.deactivated_at is None:
            org.deactivated_at, org.deactivated_by = now, actor
        org.suspended_agents = _merge(org.suspended_agents, agents)
        await session.flush()
        session.expunge(org)
        return org


async def _cancel_open(kube: KubeClient, namespace: str, value: str) -> list[str]:
    """Ask the operator to cancel every task of `namespace` not in a terminal phase."""
    cancelled = []
    for task in open_tasks_of(await kube.list_tasks(namespace)):
        name = str(task["metadata"]["name"])
        if keys.CANCEL_REQUESTED not in (task["metadata"].get("annotations") or {}):
            try:
                await kube.annotate_task(namespace, name, {keys.CANCEL_REQUESTED: value})
            except KubeNotFound:
                continue
        cancelled.append(f"{namespace}/{name}")
    return cancelled


async def _delete_all(kube: KubeClient, org: Org, instances: list[dict[str, Any]]) -> list[str]:
    deleted = []
    for instance in instances:
        name = str(instance["metadata"]["name"])
        with contextlib.suppress(KubeNotFound):
            await kube.delete_agent_instance(org.namespace, name)
        deleted.append(f"{org.namespace}/{name}")
    return deleted


async def deactivate(
    session: AsyncSession,
    sessions: async_sessionmaker[AsyncSession],
    kube: KubeClient,
    org: Org,
    actor: str,
    reason: str,
) -> OrgLifecycle:
    """Switch the org off (see the module docstring)."""
    now = datetime.now(UTC)
    instances = [i for i in await kube.list_agent_instances(org.namespace) if owned_by(i, org.id)]
    marked = await _mark(sessions, org.id, actor, now, [_kept(i) for i in instances])
    cancelled = await _cancel_open(kube, org.namespace, f"{actor} {now.isoformat()} {reason}")
    deleted = await _delete_all(kube, org, instances)
    await record(
        session,
        actor=actor,
        action="org.deactivated",
        target=f"org:{org.slug}",
        org_id=org.id,
        details={"reason": reason, "agentsDeleted": deleted, "tasksCancelled": cancelled},
    )
    return OrgLifecycle(
        orgId=str(org.id),
        active=False,
        deactivatedAt=marked.deactivated_at,
        deactivatedBy=marked.deactivated_by,
        agents=deleted,
        cancelledTasks=cancelled,
    )


async def _restore(kube: KubeClient, org: Org, kept: list[dict[str, Any]]) -> list[str]:
    restored = []
    for agent in kept:
        body = instance_body(org.id, org.namespace, agent["name"], agent["spec"])
        with contextlib.suppress(KubeConflict):  # an agent of that name exists again
            await kube.create_agent_instance(org.namespace, body)
        restored.append(f"{org.namespace}/{agent['name']}")
    return restored


async def reactivate(
    session: AsyncSession, kube: KubeClient | None, org: Org, actor: str, restore: bool
) -> OrgLifecycle:
    """Switch the org on again; recreate its kept agents when `restore`."""
    if org.deactivated_at is None:
        raise Conflict("the org is active", reason="org_active")
    kept = list(org.suspended_agents or [])
    restored: list[str] = []
    if restore and kept:
        if kube is None:
            raise KubernetesUnavailable("restoring agents needs the Kubernetes API")
        restored = await _restore(kube, org, kept)
    org.deactivated_at, org.deactivated_by, org.suspended_agents = None, None, None
    await session.flush()
    await record(
        session,
        actor=actor,
        action="org.reactivated",
        target=f"org:{org.slug}",
        org_id=org.id,
        details={"agentsRestored": restored, "agentsKept": [a["name"] for a in kept]},
    )
    return OrgLifecycle(
        orgId=str(org.id), active=True, deactivatedAt=None, deactivatedBy=None, agents=restored
    )
