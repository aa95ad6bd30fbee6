"""`DecisionIndex`: the AgenticTasks that wait for a human decision, kept in memory.

Fed by one list-then-watch of AgenticTasks across the cluster (`run`), so the queue is
answered without calling the API server. A task is kept while it is not in a terminal
phase and has a decidable step; whether that step expired is worked out when asked,
because it depends on the time. When the watch's resourceVersion is too old (410) the
index lists again; on other errors it waits a moment and lists again.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from pydantic import ValidationError

from humanwork_core import taskflow
from humanwork_core.resources import AgenticTask, Risk, Step, StepStatus
from platform_api.kube.client import KubeClient, KubeError

log = logging.getLogger(__name__)

RETRY_SECONDS = 2.0


@dataclass(frozen=True)
class OpenDecision:
    """One step of one task waiting for an expert."""

    task: AgenticTask
    step: Step
    deadline: datetime | None
    escalations: int

    @property
    def org_id(self) -> uuid.UUID:
        return uuid.UUID(self.task.spec.org_id)

    @property
    def risk(self) -> Risk:
        return self.step.risk


class DecisionIndex:
    """The open decisions of the cluster, by task."""

    def __init__(self) -> None:
        self._tasks: dict[tuple[str, str], AgenticTask] = {}
        # the decidable step of each task and its status entry, worked out once per change
        # of the task rather than on every read of the queue
        self._waiting: dict[tuple[str, str], tuple[Step, StepStatus]] = {}
        self.ready = asyncio.Event()

    def __len__(self) -> int:
        return len(self._tasks)

    def observe(self, raw: dict[str, object]) -> None:
        """Take in the current state of a task (added or modified)."""
        try:
            task = AgenticTask.from_wire(raw)
        except ValidationError:
            return
        key = (task.metadata.namespace or "", task.metadata.name)
        phase = task.current_status().phase
        step = taskflow.decidable_step(task)
        if (phase is not None and phase.terminal) or step is None:
            self._tasks.pop(key, None)
            self._waiting.pop(key, None)
        else:
            self._tasks[key] = task
            self._waiting[key] = (step, task.current_status().step(step.id))

    def forget(self, raw: dict[str, object]) -> None:
        meta = raw.get("metadata")
        if isinstance(meta, dict):
            key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
            self._tasks.pop(key, None)
            self._waiting.pop(key, None)

    def replace(self, items: list[dict[str, object]]) -> None:
        self._tasks.clear()
        self._waiting.clear()
        for raw in items:
            self.observe(raw)

    def open(self, org_ids: Collection[uuid.UUID], now: datetime) -> list[OpenDecision]:
        """The decisions of `org_ids` still open at `now`, deadline first (none last)."""
        wanted = {str(org_id) for org_id in org_ids}
        found: list[OpenDecision] = []
        for key, (step, entry) in self._waiting.items():
            task = self._tasks[key]
            if task.spec.org_id not in wanted:
                continue
            if taskflow.is_expired(entry, task.spec.policy, now):
                continue
            found.append(OpenDecision(task, step, entry.deadline, entry.escalations))
        found.sort(
            key=lambda d: (
                d.deadline is None,
                d.deadline or now,
                d.task.metadata.creation_timestamp or now,
                d.task.metadata.name,
            )
        )
        return found

    async def run(self, kube: KubeClient) -> None:
        """List, then watch, forever (until cancelled)."""
        while True:
            try:
                items, version = await kube.list_all_tasks()
                self.replace(items)
                self.ready.set()
                while True:
                    async for kind, raw in kube.watch_tasks(version):
                        meta = raw.get("metadata") or {}
                        version = str(meta.get("resourceVersion") or version)
                        if kind == "DELETED":
                            self.forget(raw)
                        elif kind in ("ADDED", "MODIFIED"):
                            self.observe(raw)
            except KubeError as exc:
                if exc.status != 410:
                    log.warning("the task watch failed (%s); listing again", exc.reason)
                    await asyncio.sleep(RETRY_SECONDS)
