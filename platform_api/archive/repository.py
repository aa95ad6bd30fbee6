"""Database access of `archived_tasks`: save a finished task (idempotent on its uid), read
one back by namespace and name, page through an org's archive."""

from __future__ import annotations

import uuid
from collections.abc import Collection
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from humanwork_core.requester import requester_of
from humanwork_core.resources import AgenticTask
from platform_api.kube.client import GROUP, TASK_KIND, VERSION
from platform_api.models import ArchivedTask


class Saved(StrEnum):
    """What `ArchiveRepository.save` did."""

    INSERTED = "inserted"
    UPDATED = "updated"
    UNCHANGED = "unchanged"


def task_of(row: ArchivedTask) -> AgenticTask:
    """The AgenticTask an archive row holds (metadata: name, namespace, uid, creation)."""
    return AgenticTask.from_wire(
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": TASK_KIND,
            "metadata": {
                "name": row.name,
                "namespace": row.namespace,
                "uid": row.uid,
                "creationTimestamp": row.created_at.isoformat(),
            },
            "spec": row.spec,
            "status": row.status,
        }
    )


class ArchiveRepository:
    """Reads and writes archived tasks through one session."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def save(self, task: AgenticTask, org_id: uuid.UUID) -> Saved:
        """Insert the finished task, or bring its stored status up to date (an agent may
        still report how an in-flight step ended after a cancel). Keyed by uid."""
        uid = task.metadata.uid or ""
        status: dict[str, Any] = task.current_status().to_wire()
        phase = status.get("phase", "")
        found = await self.session.get(ArchivedTask, uid)
        if found is not None:
            if found.status == status and found.phase == phase:
                return Saved.UNCHANGED
            found.status, found.phase = status, phase
            await self.session.flush()
            return Saved.UPDATED
        dialect = self.session.bind.dialect.name if self.session.bind else "postgresql"
        insert = pg_insert if dialect == "postgresql" else sqlite_insert
        done = await self.session.execute(
            insert(ArchivedTask)
            .values(
                uid=uid,
                org_id=org_id,
                namespace=task.metadata.namespace or "",
                name=task.metadata.name,
                phase=phase,
                requester=requester_of(task),
                description=task.spec.description[:4000],
                spec=task.spec.to_wire(),
                status=status,
                created_at=task.metadata.creation_timestamp or datetime.now(UTC),
                archived_at=datetime.now(UTC),
            )
            .on_conflict_do_nothing(index_elements=["uid"])
        )
        return Saved.INSERTED if getattr(done, "rowcount", 0) else Saved.UNCHANGED

    async def find(self, org_id: uuid.UUID, namespace: str, name: str) -> ArchivedTask | None:
        """The latest archived task of that namespace and name in the org."""
        rows = await self.session.execute(
            select(ArchivedTask)
            .where(
                ArchivedTask.org_id == org_id,
                ArchivedTask.namespace == namespace,
                ArchivedTask.name == name,
            )
            .order_by(ArchivedTask.archived_at.desc())
            .limit(1)
        )
        return rows.scalars().first()

    @staticmethod
    def _where(
        org_ids: Collection[uuid.UUID], phase: str | None, exclude: Collection[str]
    ) -> list[ColumnElement[bool]]:
        where: list[ColumnElement[bool]] = [ArchivedTask.org_id.in_(list(org_ids))]
        if phase is not None:
            where.append(ArchivedTask.phase == phase)
        if exclude:
            where.append(ArchivedTask.uid.not_in(list(exclude)))
        return where

    async def count(
        self, org_ids: Collection[uuid.UUID], phase: str | None, exclude: Collection[str]
    ) -> int:
        where = self._where(org_ids, phase, exclude)
        found = await self.session.execute(
            select(func.count()).select_from(ArchivedTask).where(*where)
        )
        return int(found.scalar_one())

    async def newest(
        self,
        org_ids: Collection[uuid.UUID],
        phase: str | None,
        exclude: Collection[str],
        limit: int,
    ) -> list[ArchivedTask]:
        """The `limit` newest (by creation) archived tasks, excluding the uids `exclude`."""
        rows = await self.session.execute(
            select(ArchivedTask)
            .where(*self._where(org_ids, phase, exclude))
            .order_by(ArchivedTask.created_at.desc(), ArchivedTask.name.desc())
            .limit(limit)
        )
        return list(rows.scalars())
