"""Scale an AgentInstance with its open work (UC-19).

An AgentInstance with `spec.autoscaling` gets ceil(open tasks / openTasksPerReplica) pods,
kept within minReplicas..maxReplicas. Its open tasks are its AgenticTasks not in a terminal
phase, counted from the tasks the operator already watches and ticks (:class:`OpenTasks`,
fed by the task handler), so scaling costs no extra list of the API.

The operator writes the count the way a HorizontalPodAutoscaler does: into the
AgentInstance's scale subresource (`spec.replicas`), never into the Deployment, which stays
the operator's own child derived from the spec (`builders.desired_replicas`). Scaling up is
at once; scaling down waits until fewer pods have been enough for the whole cooldown
(`scale_down_cooldown_seconds`), so a burst of tasks finishing and arriving does not flap.
Each change is told in an Event `Scaled` with the open-task count and the bounds.

:func:`decide` is the pure rule; :func:`autoscale` reads and writes the API around it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from agent_operator.kube import Kube
from agent_operator.reconcile import GROUP_VERSION, Event
from humanwork_core.resources import AgentInstanceSpec, Autoscaling, TaskPhase

Key = tuple[str, str]
"""(namespace, name)."""


@dataclass(frozen=True)
class ScaleDecision:
    """What the autoscaler does now, and what it remembers for the cooldown."""

    replicas: int
    """The replicas to set (the current count when nothing changes)."""
    wanted: int
    """What the open work asks for, within the bounds."""
    low_since: datetime | None
    """Since when the work has asked for fewer pods than run (None: it does not)."""
    message: str = ""
    """Why, for the Event (empty when nothing changes)."""

    def changes(self, current: int) -> bool:
        return self.replicas != current


def per_replica(spec: AgentInstanceSpec, autoscaling: Autoscaling) -> int:
    """Open tasks one pod takes: the setting, else the agent's maxConcurrentTasks."""
    return autoscaling.open_tasks_per_replica or spec.max_concurrent_tasks


def wanted_replicas(open_tasks: int, autoscaling: Autoscaling, per: int) -> int:
    """Pure: ceil(open tasks / per), within minReplicas..maxReplicas."""
    need = math.ceil(max(open_tasks, 0) / per)
    return max(autoscaling.min_replicas, min(autoscaling.max_replicas, need))


def decide(
    spec: AgentInstanceSpec,
    open_tasks: int,
    low_since: datetime | None,
    now: datetime,
    cooldown_seconds: int,
) -> ScaleDecision | None:
    """Pure: the replica count for `open_tasks` open tasks (None without autoscaling).

    Up (or back inside the bounds, which a person changed) at once; down only once the
    lower count has been enough since `low_since` for `cooldown_seconds`."""
    auto = spec.autoscaling
    if auto is None:
        return None
    current, per = spec.replicas, per_replica(spec, auto)
    wanted = wanted_replicas(open_tasks, auto, per)
    why = (
        f"{open_tasks} open task{'' if open_tasks == 1 else 's'}, {per} per replica, "
        f"bounds {auto.min_replicas}..{auto.max_replicas}"
    )
    if wanted > current or current > auto.max_replicas:
        return ScaleDecision(wanted, wanted, None, f"scaled from {current} to {wanted}: {why}")
    if wanted == current:
        return ScaleDecision(current, wanted, None)
    since = low_since or now
    if now - since < timedelta(seconds=cooldown_seconds):
        return ScaleDecision(current, wanted, since)
    message = (
        f"scaled from {current} to {wanted}: {why}; fewer replicas were enough for "
        f"{cooldown_seconds}s"
    )
    return ScaleDecision(wanted, wanted, None, message)


def task_is_open(status: dict[str, Any]) -> bool:
    """Pure: whether a task with this status is open work (a new task has no phase yet)."""
    phase = status.get("phase")
    try:
        return phase is None or not TaskPhase(phase).terminal
    except ValueError:
        return True


class OpenTasks:
    """The open (not terminal) AgenticTasks the operator has seen, by agent, with a running
    count per agent (so a count is O(1) however many tasks are open)."""

    def __init__(self) -> None:
        self._agent_of: dict[Key, str] = {}
        self._counts: dict[Key, int] = {}

    def _move(self, task: Key, before: str | None, after: str | None) -> None:
        if before is not None:
            key = (task[0], before)
            self._counts[key] -= 1
            if not self._counts[key]:
                del self._counts[key]
        if after is not None:
            key = (task[0], after)
            self._counts[key] = self._counts.get(key, 0) + 1

    def update(self, task: Key, agent: str, is_open: bool) -> Key | None:
        """Record a task's state; the (namespace, agent) whose count changed, if any."""
        before = self._agent_of.get(task)
        if is_open:
            self._agent_of[task] = agent
        else:
            self._agent_of.pop(task, None)
        after = self._agent_of.get(task)
        if before == after:
            return None
        self._move(task, before, after)
        return (task[0], after or before or agent)

    def forget(self, task: Key) -> Key | None:
        """A task is gone; the (namespace, agent) whose count changed, if any."""
        agent = self._agent_of.pop(task, None)
        if agent is None:
            return None
        self._move(task, agent, None)
        return (task[0], agent)

    def forget_namespace(self, namespace: str) -> None:
        """Drop the tasks of a namespace this operator no longer serves."""
        for task in [task for task in self._agent_of if task[0] == namespace]:
            self.forget(task)

    def count(self, namespace: str, agent: str) -> int:
        return self._counts.get((namespace, agent), 0)

    def counts(self) -> list[tuple[str, str, int]]:
        """(namespace, agent, open tasks) of every agent with open tasks."""
        return [(ns, agent, count) for (ns, agent), count in list(self._counts.items())]


@dataclass(frozen=True)
class Scaled:
    """What one autoscale pass did: the decision (None: not autoscaled) and its Event."""

    decision: ScaleDecision | None
    event: Event | None = None


async def autoscale(
    kube: Kube,
    body: dict[str, Any],
    spec: AgentInstanceSpec,
    open_tasks: int,
    low_since: datetime | None,
    now: datetime,
    cooldown_seconds: int,
) -> Scaled:
    """Decide for one AgentInstance and write a changed count to its scale subresource."""
    if spec.paused:
        return Scaled(None)  # a paused agent runs no pods whatever its work
    decision = decide(spec, open_tasks, low_since, now, cooldown_seconds)
    if decision is None or not decision.changes(spec.replicas):
        return Scaled(decision)
    meta = body["metadata"]
    await kube.merge_patch(
        GROUP_VERSION,
        "AgentInstance",
        meta["namespace"],
        meta["name"],
        {"spec": {"replicas": decision.replicas}},
        subresource="scale",
        answer=False,
    )
    return Scaled(decision, Event("Scaled", decision.message))
