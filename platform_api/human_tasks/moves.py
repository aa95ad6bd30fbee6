"""What an expert's move on a step from the review queue (resolve, retry, reopen) shares:
the write of `steps.write` on the task as it is now in the org, the step checked on every
read (404 when the plan lacks it; 403 `self_approval_forbidden` for the task's own
requester where the move refuses them), and the move's audit record."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from humanwork_core.resources import AgenticTask
from platform_api.access.principal import Principal
from platform_api.errors import NotFound, SelfApproval
from platform_api.kube.client import KubeClient
from platform_api.steps.audit import MoveRecord, audit
from platform_api.steps.write import Move, StepWrite, Written, read_in_org, write_move
from platform_api.tasks.requester import is_requester


@dataclass(frozen=True)
class ExpertMove:
    """One expert's move on one step of a task of the org."""

    session: AsyncSession
    kube: KubeClient
    principal: Principal
    org_id: uuid.UUID
    namespace: str
    name: str
    step_id: str
    what: str
    """The write's name in its errors ("change", "reopening")."""
    refuses_requester: str | None = None
    """The 403's message when the task's requester may not make this move."""

    async def write(self, move: Move) -> Written:
        """Write `move` under the task's resourceVersion (`steps.write`)."""
        how = StepWrite(
            self.kube,
            self.step_id,
            self.what,
            lambda: read_in_org(self.kube, self.org_id, self.namespace, self.name),
            check=self._check,
        )
        return await write_move(how, move)

    async def _check(self, task: AgenticTask) -> None:
        if task.step(self.step_id) is None:
            raise NotFound("the plan has no such step", step_id=self.step_id)
        if self.refuses_requester is not None and await is_requester(
            self.session, self.org_id, task, self.principal.username
        ):
            raise SelfApproval(self.refuses_requester, step_id=self.step_id)

    async def audit(self, action: str, written: Written, facts: Mapping[str, Any]) -> None:
        """Audit the move written as `action`, with its own `facts`."""
        record = MoveRecord(
            self.principal.username,
            action,
            self.namespace,
            self.name,
            self.org_id,
            self.step_id,
            facts,
            written.task.metadata.uid,
        )
        await audit(self.session, record)
