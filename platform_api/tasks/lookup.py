"""The task a UID names: seed 000's clients hold a task's UUID (`metadata.uid`), not its
`<namespace>/<name>`.

Scoped exactly like the name: only the caller's orgs' namespaces are searched (and their
archived tasks), and the task must belong to the org that owns the namespace, so a UID of
another org's task answers the same 404 `not_found` as an unknown one. The API server
cannot select custom resources by uid, so the caller's orgs' tasks are listed (as
`GET /agentic/tasks` does) and matched here.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from humanwork_core.resources import AgenticTask
from platform_api.archive.repository import task_of
from platform_api.errors import NotFound
from platform_api.floor.principal import Principal
from platform_api.kube.client import KubeClient
from platform_api.models import ArchivedTask, Org
from platform_api.tasks.schemas import TaskRead
from platform_api.tasks.service import read_model


async def find_by_uid(
    session: AsyncSession, kube: KubeClient, principal: Principal, uid: uuid.UUID
) -> tuple[AgenticTask, bool]:
    """The caller's task whose `metadata.uid` is `uid`, live or archived; (task, archived).
    404 `not_found` for a UID of no task of the caller's orgs."""
    wanted = str(uid)
    found = await session.execute(select(Org).where(Org.id.in_(list(principal.org_ids))))
    orgs = list(found.scalars()) if principal.org_ids else []
    listed = await asyncio.gather(*(kube.list_tasks(org.namespace) for org in orgs))
    for org, raws in zip(orgs, listed, strict=True):
        for raw in raws:
            if raw.get("metadata", {}).get("uid") != wanted:
                continue
            task = AgenticTask.from_wire(raw)
            if task.spec.org_id == str(org.id):
                return task, False
    row = await session.get(ArchivedTask, wanted)
    if row is not None and row.org_id in principal.org_ids:
        return task_of(row), True
    raise NotFound("no such task")


async def name_of_uid(
    session: AsyncSession, kube: KubeClient, principal: Principal, uid: uuid.UUID
) -> tuple[str, str]:
    """`(namespace, name)` of the caller's task whose uid is `uid` (404 otherwise)."""
    task, _ = await find_by_uid(session, kube, principal, uid)
    return task.metadata.namespace or "", task.metadata.name


async def get_task_by_uid(
    session: AsyncSession, kube: KubeClient, principal: Principal, uid: uuid.UUID
) -> TaskRead:
    """The caller's task whose uid is `uid`, as `GET /agentic/tasks/{namespace}/{name}`
    answers it."""
    task, archived = await find_by_uid(session, kube, principal, uid)
    return read_model(task, datetime.now(UTC), archived)
