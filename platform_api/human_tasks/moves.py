"""What an expert's move on a step from the review queue (resolve, retry, reopen) shares:
where it lands (`StepAt`: the request's session, client, caller and step), its scope (the
caller's org of the namespace), the write of `steps.write` on the task as it is now in the
org with the step checked on every read (404 when the plan lacks it; 403
`self_approval_forbidden` for the task's own requester where the move refuses them), and
the move's audit record."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from humanwork_core.resources import AgenticTask
from platform_api.errors import NotFound, SelfApproval
from platform_api.floor.principal import Principal
from platform_api.kube.client import KubeClient
from platform_api.steps.audit import MoveRecord, audit
from platform_api.steps.write import Move, StepWrite, Written, read_in_org, write_move
from platform_api.tasks.requester import is_requester
from platform_api.tasks.service import org_of_namespace


@dataclass(frozen=True)
class StepAt:
    """The step an expert's request names, with what the request holds."""

    session: AsyncSession
    kube: KubeClient
    principal: Principal
    namespace: str
    name: str
    step_id: str

    @property
    def id(self) -> str:
        """The human task's id, `<namespace>/<task name>/<step id>`."""
        return f"{self.namespace}/{self.name}/{self.step_id}"

    @property
    def by(self) -> str:
        return self.principal.username

    async def expert(self, what: str, refuses_requester: str | None = None) -> ExpertMove:
        """The move in the caller's org of the namespace (404 outside it)."""
        org = await org_of_namespace(self.session, self.principal, self.namespace)
        return ExpertMove(self, org.id, what, refuses_requester)


@dataclass(frozen=True)
class ExpertMove:
    """One expert's move on one step of a task of the org."""

    at: StepAt
    org_id: uuid.UUID
    what: str
    """The write's name in its errors ("change", "reopening")."""
    refuses_requester: str | None = None
    """The 403's message when the task's requester may not make this move."""

    async def write(self, move: Move) -> Written:
        """Write `move` under the task's resourceVersion (`steps.write`)."""
        at = self.at
        how = StepWrite(
            at.kube,
            at.step_id,
            self.what,
            lambda: read_in_org(at.kube, self.org_id, at.namespace, at.name),
            check=self._check,
        )
        return await write_move(how, move)

    async def _check(self, task: AgenticTask) -> None:
        at = self.at
        if task.step(at.step_id) is None:
            raise NotFound("the plan has no such step", step_id=at.step_id)
        if self.refuses_requester is not None and await is_requester(
            at.session, self.org_id, task, at.by
        ):
            raise SelfApproval(self.refuses_requester, step_id=at.step_id)

    async def audit(self, action: str, written: Written, facts: Mapping[str, Any]) -> None:
        """Audit the move written as `action`, with its own `facts`."""
        at = self.at
        record = MoveRecord(
            at.by,
            action,
            at.namespace,
            at.name,
            self.org_id,
            at.step_id,
            facts,
            written.task.metadata.uid,
        )
        await audit(at.session, record)
