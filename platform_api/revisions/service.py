"""Asking an agent to revise a rejected plan (`Reviser`), and reading what a revision
changed (`revision_diff`).

A task rejected with feedback (the rejected step's decision carries it) is sent back to
its agent through the signed plan command (`POST /v1/tasks` with `revises`, `feedback`,
the request, the conversation and the task's policy), with an idempotency key derived
from the rejected task's uid: a second replica, or a retry after a restart, names the
same revised task. The revised task's requester is the rejected task's, as the platform
bound it (`tasks.requester.bound_requester`: the person bound to the plan request the
rejected task carries, whatever the task says), bound to the revision request before the
agent is asked (`agents.bindings.bind_before_asking`) and then vouched for on the revised
task, as for any plan the platform asks for. The chain of `revisionOf` is followed
(the API server, then the archive) to count the revisions already made; at
`revision_limit` no further one is asked for and the request ends rejected.
"""

from __future__ import annotations

import logging
import uuid
from enum import StrEnum
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from humanwork_core import taskflow
from humanwork_core.plandiff import PlanDiff, plan_diff
from humanwork_core.requester import plan_request_id
from humanwork_core.resources import AgenticTask, Verdict
from platform_api.agents.bindings import bind_before_asking, mark_bound
from platform_api.agents.commands import AgentCommands, org_agent
from platform_api.agents.planning import bind_requester
from platform_api.archive.repository import ArchiveRepository, task_of
from platform_api.floor.audit.service import record
from platform_api.kube.client import KubeClient, KubeNotFound
from platform_api.settings import Settings
from platform_api.tasks.requester import bound_requester

log = logging.getLogger(__name__)


class Revised(StrEnum):
    """What became of a rejected task."""

    REQUESTED = "requested"
    NO_FEEDBACK = "no_feedback"
    LIMIT = "limit"


def rejection_feedback(task: AgenticTask) -> str | None:
    """The feedback of the task's rejected step (or the reason the initiating client gave
    for declining one, which halts the task the same way), if any."""
    for entry in task.current_status().steps:
        decision = entry.decision
        if decision is not None and decision.verdict is Verdict.REJECT and decision.feedback:
            return decision.feedback
        confirmation = entry.confirmation
        if taskflow.is_declined(entry) and confirmation is not None and confirmation.reason:
            return f"the client declined: {confirmation.reason}"
    return None


async def previous(
    session: AsyncSession, kube: KubeClient, task: AgenticTask
) -> AgenticTask | None:
    """The task `task` revises (from the API server, else the archive), if any."""
    name, namespace = task.spec.revision_of, task.metadata.namespace or ""
    if not name:
        return None
    try:
        return AgenticTask.from_wire(await kube.get_task(namespace, name))
    except KubeNotFound:
        pass
    row = await ArchiveRepository(session).find(uuid.UUID(task.spec.org_id), namespace, name)
    return task_of(row) if row is not None else None


async def revisions_made(session: AsyncSession, kube: KubeClient, task: AgenticTask) -> int:
    """How many revisions led to `task` (0 for an original plan)."""
    count, current = 0, task
    while count <= 50:
        earlier = await previous(session, kube, current)
        if earlier is None or earlier.spec.org_id != task.spec.org_id:
            return count
        count, current = count + 1, earlier
    return count


def revision_diff(before: AgenticTask, after: AgenticTask) -> PlanDiff:
    """What `after` (a revision) changed against `before`."""
    return plan_diff(before.spec.steps, after.spec.steps)


def _command(task: AgenticTask, feedback: str, requester: str, request_id: str) -> dict[str, Any]:
    command: dict[str, Any] = {
        "request": task.spec.description,
        "requester": requester,
        "planRequest": request_id,
        "revises": task.metadata.name,
        "feedback": feedback,
        "policy": task.spec.policy.model_dump(mode="json", by_alias=True, exclude_none=True),
    }
    if task.spec.conversation_id:
        command["conversationId"] = task.spec.conversation_id
    return command


class Reviser:
    """Asks the agent of a rejected task for a revised plan (see the module docstring)."""

    def __init__(
        self,
        settings: Settings,
        sessions: async_sessionmaker[AsyncSession],
        kube: KubeClient | None,
        commands: AgentCommands,
    ) -> None:
        self._settings, self._sessions, self._kube = settings, sessions, kube
        self._commands = commands

    async def __call__(self, task: AgenticTask) -> Revised:
        kube = self._kube
        feedback = rejection_feedback(task)
        if feedback is None or kube is None:
            return Revised.NO_FEEDBACK
        org_id = uuid.UUID(task.spec.org_id)
        async with self._sessions() as session, session.begin():
            made = await revisions_made(session, kube, task)
            if made >= self._settings.revision_limit:
                await self._audit(session, task, "task.revision_limit", {"revisions": made})
                return Revised.LIMIT
            target = await org_agent(session, kube, org_id, task.spec.agent_ref.name)
            requester = await bound_requester(session, org_id, task)
        key = f"revision-{task.metadata.uid}"
        request_id = plan_request_id(str(org_id), target.name, requester, key)
        await bind_before_asking(
            self._sessions, org_id, target.name, requester, request_id, "revision"
        )
        planned = await self._commands.send(
            target, "/v1/tasks", _command(task, feedback, requester, request_id), key
        )
        name = str(planned.get("name") or "")
        bound = await bind_requester(
            kube, target.org.namespace, name, target.name, request_id, requester
        )
        async with self._sessions() as session, session.begin():
            if bound:
                await mark_bound(session, request_id, name)
            details = {"revision": name, "revisions": made + 1, "requesterBound": bound}
            await self._audit(session, task, "task.revision_requested", details)
        return Revised.REQUESTED

    async def _audit(
        self, session: AsyncSession, task: AgenticTask, action: str, details: dict[str, Any]
    ) -> None:
        await record(
            session,
            actor="platform",
            action=action,
            target=f"agentictask:{task.metadata.namespace}/{task.metadata.name}",
            org_id=uuid.UUID(task.spec.org_id),
            details={**details, "uid": task.metadata.uid},
        )
