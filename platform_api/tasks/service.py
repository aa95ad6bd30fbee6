"""Task use cases: create a task from a plan, list and read the caller's tasks (deciding
a step is the decision service's, `tasks.decisions`)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from humanwork_core import taskflow
from humanwork_core.requester import requester_of
from humanwork_core.resources import (
    AgenticTask,
    AgenticTaskSpec,
    AgentRef,
    TaskPhase,
    TaskPolicy,
)
from platform_api.archive.repository import ArchiveRepository, task_of
from platform_api.errors import (
    Conflict,
    NotFound,
    ValidationFailed,
)
from platform_api.floor.audit.service import record
from platform_api.floor.principal import Principal
from platform_api.kube.client import (
    GROUP,
    TASK_KIND,
    VERSION,
    KubeClient,
    KubeInvalid,
    KubeNotFound,
)
from platform_api.models import Org
from platform_api.tasks.orgs import OrgDirectory, OrgRef
from platform_api.tasks.schemas import PhaseFilter, TaskCreate, TaskRead, TaskSummary
from platform_api.tasks.seedview import seed_status, seed_steps

if TYPE_CHECKING:
    pass

NAME_PREFIX = "task-"


def _now() -> datetime:
    return datetime.now(UTC)


# --- orgs and tasks in scope ---------------------------------------------------------------


async def _orgs(session: AsyncSession, principal: Principal) -> list[Org]:
    if not principal.org_ids:
        return []
    found = await session.execute(
        select(Org).where(Org.id.in_(list(principal.org_ids))).order_by(Org.slug)
    )
    return list(found.scalars())


async def org_of_namespace(
    session: AsyncSession,
    principal: Principal,
    namespace: str,
    orgs: OrgDirectory | None = None,
) -> OrgRef:
    """The caller's org that owns `namespace`; 404 for any other namespace. With `orgs`,
    the namespace's org comes from that cache (membership is checked every time)."""
    if orgs is not None:
        ref = await orgs.by_namespace(session, namespace)
        if ref is None or ref.id not in principal.org_ids:
            raise NotFound("no such task")
        return ref
    found = await session.execute(
        select(Org).where(Org.namespace == namespace, Org.id.in_(list(principal.org_ids)))
    )
    org = found.scalars().first()
    if org is None:
        raise NotFound("no such task")
    return OrgRef(org.id, org.namespace)


async def read_task(kube: KubeClient, org: OrgRef, name: str) -> AgenticTask:
    try:
        raw = await kube.get_task(org.namespace, name)
    except KubeNotFound:
        raise NotFound("no such task") from None
    task = AgenticTask.from_wire(raw)
    if task.spec.org_id != str(org.id):
        raise NotFound("no such task")
    return task


async def read_or_archived(
    session: AsyncSession, kube: KubeClient, org: OrgRef, name: str
) -> tuple[AgenticTask, bool]:
    """The task from the API server, or from the archive when the resource is gone
    (the operator removes finished tasks after their TTL); (task, archived)."""
    try:
        return await read_task(kube, org, name), False
    except NotFound:
        row = await ArchiveRepository(session).find(org.id, org.namespace, name)
        if row is None:
            raise
        return task_of(row), True


def phase_of(task: AgenticTask, now: datetime) -> TaskPhase:
    """The recorded phase, or the derived one before the operator's first pass."""
    return task.current_status().phase or taskflow.derive_phase(task, now)


def _summary_fields(task: AgenticTask, now: datetime, archived: bool) -> dict[str, Any]:
    status = task.current_status()
    meta = task.metadata
    phase = phase_of(task, now)
    return {
        "id": f"{meta.namespace}/{meta.name}",
        "uid": meta.uid or "",
        "namespace": meta.namespace or "",
        "name": meta.name,
        "org_id": uuid.UUID(task.spec.org_id),
        "agent": task.spec.agent_ref.name,
        "description": task.spec.description,
        "requested_by": requester_of(task),
        "phase": phase,
        "seed_status": seed_status(task, phase, now),
        "current_step": status.current_step,
        "highest_pending_risk": status.highest_pending_risk,
        "next_deadline": status.next_deadline,
        "created_at": meta.creation_timestamp,
        "resource_version": meta.resource_version or "",
        "archived": archived,
    }


def summary(task: AgenticTask, now: datetime, archived: bool = False) -> TaskSummary:
    return TaskSummary(**_summary_fields(task, now, archived))


def read_model(task: AgenticTask, now: datetime, archived: bool = False) -> TaskRead:
    """The task's read model, validated once (its summary's fields and the rest)."""
    return TaskRead(
        **_summary_fields(task, now, archived),
        spec=task.spec.to_wire(),
        status=task.current_status().to_wire(),
        step_hashes={step.id: taskflow.step_hash(step) for step in task.spec.steps},
        steps=seed_steps(task, now),
    )


# --- use cases -----------------------------------------------------------------------------


async def create_task(
    session: AsyncSession, kube: KubeClient, principal: Principal, body: TaskCreate
) -> TaskRead:
    """Create the AgenticTask of `body` in the org's namespace; the caller requests it."""
    if body.org_id not in principal.org_ids:
        raise NotFound("no such org")
    org = await session.get(Org, body.org_id)
    if org is None:
        raise NotFound("no such org")
    try:
        spec = AgenticTaskSpec(
            org_id=str(org.id),
            agent_ref=AgentRef(name=body.agent_ref),
            conversation_id=str(body.conversation_id) if body.conversation_id else None,
            description=body.description,
            requested_by=principal.username,
            policy=body.policy or TaskPolicy(),
            steps=tuple(body.steps),
        )
    except ValidationError as exc:
        raise ValidationFailed(
            "the plan is not valid",
            errors="; ".join(
                f"{'.'.join(str(part) for part in e['loc'])}: {e['msg']}" for e in exc.errors()
            ),
        ) from None
    manifest = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": TASK_KIND,
        "metadata": {
            "generateName": NAME_PREFIX,
            "namespace": org.namespace,
            "labels": {"app.kubernetes.io/managed-by": "humanwork-platform-api"},
        },
        "spec": spec.to_wire(),
    }
    try:
        made = AgenticTask.from_wire(await kube.create_task(org.namespace, manifest))
    except KubeInvalid as exc:
        raise ValidationFailed("the API server refused the plan", reason=exc.message) from None
    except KubeNotFound:
        raise Conflict("the org's namespace does not exist", namespace=org.namespace) from None
    await record(
        session,
        actor=principal.username,
        action="task.created",
        target=f"agentictask:{org.namespace}/{made.metadata.name}",
        org_id=org.id,
        details={"uid": made.metadata.uid, "steps": list(spec.step_ids)},
    )
    return read_model(made, _now())


async def list_tasks(
    session: AsyncSession,
    kube: KubeClient,
    principal: Principal,
    *,
    org_id: uuid.UUID | None,
    status: PhaseFilter | None,
    limit: int,
    offset: int,
) -> tuple[list[TaskSummary], int]:
    """The caller's tasks (of one org, or all its orgs), newest first, one page: the
    resources in the orgs' namespaces and, after them in the same order, the archived
    tasks whose resource is gone."""
    orgs = await _orgs(session, principal)
    if org_id is not None:
        orgs = [org for org in orgs if org.id == org_id]
        if not orgs:
            raise NotFound("no such org")
    listed = await asyncio.gather(*(kube.list_tasks(org.namespace) for org in orgs))
    now = _now()
    org_ids = {str(org.id) for org in orgs}
    every = [
        task
        for task in (AgenticTask.from_wire(raw) for raws in listed for raw in raws)
        if task.spec.org_id in org_ids
    ]
    live = {t.metadata.uid or "" for t in every if phase_of(t, now).terminal}
    tasks = [t for t in every if status is None or phase_of(t, now) is status.phase]
    archive = ArchiveRepository(session)
    ids = [org.id for org in orgs]
    phase = status.phase.value if status is not None else None
    stored = await archive.newest(ids, phase, live, offset + limit)
    entries = [(t, False) for t in tasks] + [(task_of(row), True) for row in stored]
    entries.sort(
        key=lambda e: (e[0].metadata.creation_timestamp or now, e[0].metadata.name), reverse=True
    )
    total = len(tasks) + await archive.count(ids, phase, live)
    return [summary(t, now, a) for t, a in entries[offset : offset + limit]], total


async def get_task(
    session: AsyncSession,
    kube: KubeClient,
    principal: Principal,
    namespace: str,
    name: str,
    orgs: OrgDirectory | None = None,
) -> TaskRead:
    org = await org_of_namespace(session, principal, namespace, orgs)
    task, archived = await read_or_archived(session, kube, org, name)
    return read_model(task, _now(), archived)
