"""What the platform does on its own when its watch sees a task change.

- **Auto-approval by policy.** Only the platform's identity may write decisions (the
  admission policies), so the platform applies `taskflow.auto_approve`: when a task's
  decidable step calls a read-only action of the catalog, its effective risk is low, the
  org's policy (read from the database now) opted in and the task's `autoApprove` lists
  low (`humanwork_core.policy`; by default nothing is ever auto-approved), the
  decision is written with approver `policy:auto-approve`, by the same write as an
  expert's (`steps.write`, under the resourceVersion seen), and audited
  (`task.step.auto_approve`).
- **Archiving.** When a task reaches a terminal phase (Completed, Rejected, Failed,
  Cancelled, Expired), its spec and final status are saved into `archived_tasks`
  (idempotent on the uid) and the task is annotated `humanwork.io/archived`; the operator
  then removes it once its TTL has passed, and the task endpoints answer it from the
  archive.

Both act only on tasks of orgs this platform knows, in their org's namespace. The watch
relists on (re)start, so whatever finished while the platform was down is archived then.
Work is queued per task and done by a few workers; a task changed again while queued is
handled once, at its latest version, and never by two workers at once. When the database
or the API server fails, the task is tried again after `RETRY_SECONDS`; when the task
changed meanwhile (a write refused by its resourceVersion precondition), its next change
brings it back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from humanwork_core import taskflow
from humanwork_core.policy import OrgPolicy, effective_risk
from humanwork_core.resources import AgenticTask, AgenticTaskStatus
from platform_api.archive.service import ARCHIVED_ANNOTATION, archive
from platform_api.errors import NotFound
from platform_api.kube.client import KubeClient
from platform_api.orgs.repository import OrgRepository
from platform_api.steps.audit import MoveRecord, audit
from platform_api.steps.write import StaleWrite, StepWrite, write_move
from platform_api.tasks.orgs import OrgDirectory, OrgRef

log = logging.getLogger(__name__)

Key = tuple[str, str]
OPTED_IN = OrgPolicy(auto_approve_low=True)
"""The loosest org policy: what the cheap pre-check assumes before reading the org's."""
WORKERS = 4
RETRY_SECONDS = 5.0


def wants_auto_approval(task: AgenticTask, now: datetime) -> bool:
    """Whether the task's own policy could let its decidable step auto-approve now, were
    the org to allow it (cheap; the org's policy is read from the database when handled)."""
    if not task.spec.policy.auto_approve:
        return False
    return taskflow.auto_approve(task, now, org=OPTED_IN) is not None


class TaskAutomation:
    """Auto-approval and archiving, fed by the `DecisionIndex`'s watch."""

    def __init__(
        self,
        kube: KubeClient,
        sessions: async_sessionmaker[AsyncSession],
        orgs: OrgDirectory,
        workers: int = WORKERS,
    ) -> None:
        self._kube = kube
        self._sessions = sessions
        self._orgs = orgs
        self._workers = workers
        self._queue: asyncio.Queue[Key] = asyncio.Queue()
        self._latest: dict[Key, AgenticTask] = {}
        self._busy: set[Key] = set()
        self._archived: dict[Key, str] = {}
        """The resourceVersion of each task as last archived (and annotated)."""

    # --- fed by the watch (synchronous, cheap) --------------------------------------------

    def observe(self, task: AgenticTask) -> None:
        key = (task.metadata.namespace or "", task.metadata.name)
        phase = task.current_status().phase
        if phase is not None and phase.terminal:
            if (
                ARCHIVED_ANNOTATION in task.metadata.annotations
                and self._archived.get(key) == task.metadata.resource_version
            ):
                return
        elif not wants_auto_approval(task, datetime.now(UTC)):
            return
        queued = key in self._latest
        self._latest[key] = task
        if not queued and key not in self._busy:
            self._queue.put_nowait(key)

    def forget(self, key: Key) -> None:
        self._latest.pop(key, None)
        self._archived.pop(key, None)

    # --- the workers ----------------------------------------------------------------------

    async def run(self) -> None:
        """Work the queue forever (until cancelled)."""
        workers = [asyncio.create_task(self._work()) for _ in range(self._workers)]
        try:
            await asyncio.gather(*workers)
        finally:
            for worker in workers:
                worker.cancel()
            for worker in workers:
                with contextlib.suppress(asyncio.CancelledError):
                    await worker

    async def _work(self) -> None:
        while True:
            key = await self._queue.get()
            task = self._latest.pop(key, None)
            if task is None:
                continue
            self._busy.add(key)
            try:
                await self.handle(task)
            except StaleWrite:
                pass  # changed meanwhile: its next change brings it back
            except Exception as exc:  # the database or the API server failed: try again
                log.warning("task %s/%s: %s; retrying in %ss", *key, exc, RETRY_SECONDS)
                self._retry(key, task)
            finally:
                self._busy.discard(key)
                if key in self._latest:  # changed again while being handled
                    self._queue.put_nowait(key)

    def _retry(self, key: Key, task: AgenticTask) -> None:
        def again() -> None:
            if key not in self._latest:  # unless a newer version is queued already
                self._latest[key] = task
                if key not in self._busy:
                    self._queue.put_nowait(key)

        asyncio.get_running_loop().call_later(RETRY_SECONDS, again)

    async def _org(self, task: AgenticTask) -> OrgRef | None:
        try:
            org_id = uuid.UUID(task.spec.org_id)
        except ValueError:
            return None
        async with self._sessions() as session:
            org = await self._orgs.by_id(session, org_id)
        if org is None or org.namespace != task.metadata.namespace:
            return None
        return org

    async def handle(self, task: AgenticTask) -> None:
        """Archive a finished task or auto-approve its decidable step, as applies."""
        org = await self._org(task)
        if org is None:
            return
        key = (task.metadata.namespace or "", task.metadata.name)
        phase = task.current_status().phase
        if phase is not None and phase.terminal:
            annotated = await archive(self._sessions, self._kube, task, org.id)
            version = (
                str(annotated["metadata"]["resourceVersion"])
                if annotated is not None
                else task.metadata.resource_version
            )
            if version:
                self._archived[key] = version
            return
        await self._auto_approve(task, org)

    async def _auto_approve(self, task: AgenticTask, org: OrgRef) -> None:
        now = datetime.now(UTC)
        async with self._sessions() as session:
            org_policy = await OrgRepository(session).policy(org.id)
        step = taskflow.decidable_step(task)
        if step is None or taskflow.auto_approve(task, now, org=org_policy) is None:
            return

        async def watched() -> AgenticTask:
            return task  # the version seen: a change meanwhile brings the task back

        def move(current: AgenticTask) -> AgenticTaskStatus:
            after = taskflow.auto_approve(current, now, org=org_policy)
            return after if after is not None else current.current_status()

        how = StepWrite(self._kube, step.id, "auto-approval", watched, attempts=1)
        try:
            written = await write_move(how, move)
        except NotFound:
            return  # gone meanwhile
        decision = written.after.step(step.id).decision
        assert decision is not None
        facts = {
            "risk": effective_risk(step).value,
            "verdict": decision.verdict.value,
            "at": now.isoformat(),
            "idempotency_key": decision.idempotency_key,
            "step_hash": decision.step_hash,
            "policy": [risk.value for risk in task.spec.policy.auto_approve],
            "org_policy": org_policy.model_dump(mode="json", by_alias=True),
        }
        ns, name = task.metadata.namespace or "", task.metadata.name
        record = MoveRecord(
            taskflow.AUTO_APPROVER,
            "task.step.auto_approve",
            ns,
            name,
            org.id,
            step.id,
            facts,
            task.metadata.uid,
        )
        async with self._sessions() as session, session.begin():
            await audit(session, record)
