"""The one shape of a move's audit record: who (`actor`) made which move (`action`) on which
task (`agentictask:<namespace>/<name>`, or `task:` for a move on the whole task), in which
org's chain; its details the step first, then the move's own facts, then the task's uid."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from platform_api.floor.audit.service import record, record_detached


@dataclass(frozen=True)
class MoveRecord:
    """One move as audited."""

    actor: str
    action: str
    namespace: str
    name: str
    org_id: uuid.UUID
    step_id: str | None
    facts: Mapping[str, Any] = field(default_factory=dict)
    uid: str | None = None
    kind: str = "agentictask"
    """The target's kind: `agentictask` for a step's move, `task` for the whole task's."""

    @property
    def target(self) -> str:
        return f"{self.kind}:{self.namespace}/{self.name}"

    def details(self) -> dict[str, Any]:
        step = {"step_id": self.step_id} if self.step_id is not None else {}
        uid = {"uid": self.uid} if self.uid is not None else {}
        return {**step, **self.facts, **uid}

    def fields(self) -> dict[str, Any]:
        """The audit log's fields of this record."""
        return {
            "actor": self.actor,
            "action": self.action,
            "target": self.target,
            "org_id": self.org_id,
            "details": self.details(),
        }


async def audit(session: AsyncSession, move: MoveRecord) -> None:
    """Append the move to its org's chain in the caller's transaction."""
    await record(session, **move.fields())


async def audit_refusal(sessions: async_sessionmaker[AsyncSession], move: MoveRecord) -> None:
    """Append a refused move (outcome `denied`) in a transaction of its own: the request's
    own transaction rolls back with the refusal."""
    await record_detached(sessions, **move.fields())
