"""Archiving a finished task: save it (spec and final status) into `archived_tasks`, audit
the first save in the org's chain, then annotate the resource `humanwork.io/archived`
(the operator removes an annotated finished task once its TTL has passed)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from humanwork_core import keys
from humanwork_core.resources import AgenticTask
from platform_api.archive.repository import ArchiveRepository, Saved
from platform_api.floor.audit.service import record
from platform_api.kube.client import KubeClient, KubeNotFound

ARCHIVED_ANNOTATION = keys.ARCHIVED
"""The annotation the operator waits for before it removes a finished task (its value is
the time of archiving; the operator only checks that it is present)."""

ARCHIVER = "platform:archiver"
"""The actor of the `task.archived` audit rows."""


async def archive(
    sessions: async_sessionmaker[AsyncSession],
    kube: KubeClient,
    task: AgenticTask,
    org_id: uuid.UUID,
) -> dict[str, Any] | None:
    """Save the finished `task` (its own transaction, committed first), then annotate the
    resource; answers the annotated object, or None when it was annotated already or is
    gone. Idempotent: a task archived twice is one row and one audit record."""
    ns, name = task.metadata.namespace or "", task.metadata.name
    async with sessions() as session, session.begin():
        saved = await ArchiveRepository(session).save(task, org_id)
        if saved is Saved.INSERTED:
            phase = task.current_status().phase
            await record(
                session,
                actor=ARCHIVER,
                action="task.archived",
                target=f"agentictask:{ns}/{name}",
                org_id=org_id,
                details={"uid": task.metadata.uid, "phase": phase.value if phase else None},
            )
    if ARCHIVED_ANNOTATION in task.metadata.annotations:
        return None
    try:
        return await kube.annotate_task(
            ns, name, {ARCHIVED_ANNOTATION: datetime.now(UTC).isoformat()}
        )
    except KubeNotFound:
        return None
