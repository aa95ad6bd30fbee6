"""What the operator's handlers share while it runs (kept in kopf's memo): the client, the
settings and keys, per-instance locks, what is due when, what was applied and reported, the
shards' namespaces, autoscaling's counts, and the queue of full reconciles."""

from __future__ import annotations

import asyncio
import os
import weakref
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agent_operator import autoscale
from agent_operator.child_watch import ChildWatch
from agent_operator.config import OperatorSettings
from agent_operator.kube import Kube
from agent_operator.reconcile import ApiServerEndpoints, AppliedCache, Keyring
from agent_operator.shards import Namespaces, shard_of
from agent_operator.workqueue import WorkQueue
from humanwork_core import heap

QUIET_SECONDS, TRIM_SECONDS = 5.0, 60.0
"""Quiet this long after the last event, or busy TRIM_SECONDS, the freed heap is trimmed."""


@dataclass(frozen=True)
class Job:
    """A full reconcile asked for by an AgentInstance's event: the body the event carried
    (used as is when `seen_first`: this process had never reconciled the instance, so
    none of its writes can be missing from it) and the trigger for the metrics."""

    body: dict[str, Any]
    trigger: str
    seen_first: bool


class State:
    """What the handlers share, kept in kopf's memo."""

    def __init__(self, kube: Kube, settings: OperatorSettings, keyring: Keyring) -> None:
        self.kube = kube
        self.settings = settings
        self.keyring = keyring
        # a lock per object only while a reconcile holds or awaits it (not per task ever seen:
        # a lock kept per task would outlive the task, never given back)
        self.locks: weakref.WeakValueDictionary[tuple[str, str], asyncio.Lock]
        self.locks = weakref.WeakValueDictionary()
        # when each known instance is next due: (time, trigger), trigger rotation or resync
        self.due: dict[tuple[str, str], tuple[datetime, str]] = {}
        self.scheduler: asyncio.Task[None] | None = None
        # the operator's own watches of the children (started with the operator)
        self.watches: list[ChildWatch] = []
        # when each open AgenticTask next needs a tick (its nearest deadline, or its TTL)
        self.task_due: dict[tuple[str, str], datetime] = {}
        self.applied = AppliedCache()
        self.endpoints = ApiServerEndpoints()
        # the instances to reconcile in full, worked outside kopf's slots (see workqueue)
        self.queue: WorkQueue[Job] | None = None
        # when a change of an instance's pod count alone, held back, is to be written
        # (unless its pods' readiness writes it first; see agent_operator.readiness)
        self.counts_due: dict[tuple[str, str], datetime] = {}
        # (replicas, readyReplicas) last reported in each instance's status
        self.reported: dict[tuple[str, str], tuple[int, int]] = {}
        # the phase each instance's last reconcile reported (the metrics)
        self.phases: dict[tuple[str, str], str] = {}
        # the shard of each org namespace, and the fingerprint of what each served
        # instance declared when it was last reconciled
        self.namespaces = Namespaces(settings.shard)
        # the labels of each served org namespace that is not terminating, as last seen
        self.namespace_labels: dict[str, dict[str, str]] = {}
        self.declared: dict[tuple[str, str], str] = {}
        # autoscaling: open tasks by agent, since when each agent needed fewer pods, and
        # when a pending scale-down's cooldown ends
        self.open_tasks = autoscale.OpenTasks()
        self.low_since: dict[tuple[str, str], datetime] = {}
        self.scale_due: dict[tuple[str, str], datetime] = {}
        # when the freed heap is given back: busy TRIM_SECONDS, or quiet QUIET_SECONDS
        self.heap = heap.Trimmer(every=TRIM_SECONDS, quiet=QUIET_SECONDS)
        # the platform CA file's stamp when last looked at (a change re-applies every agent's)
        self.platform_ca_stamp = stamp(settings.platform_ca_file)

    def active(self) -> None:
        """Note work just done (an event handled, a reconcile ended): the heap is trimmed
        once the operator has then been quiet for QUIET_SECONDS: events of other
        shards' orgs, dropped without a reconcile, left their burst's memory untrimmed."""
        self.heap.active()

    async def serves(self, namespace: str) -> bool:
        """Whether `namespace` belongs to this operator's shard (read once, then from the
        namespace watch)."""
        shard = self.namespaces.known(namespace)
        if shard is None:
            body = await self.kube.get("v1", "Namespace", None, namespace)
            shard = shard_of(body)
            self.namespaces.learn(namespace, shard)
            self.see_namespace(namespace, body)
        return self.namespaces.serves(shard)

    def see_namespace(self, name: str, body: dict[str, Any] | None) -> dict[str, str] | None:
        """Remember the labels of namespace `name` if this operator serves it (forget them
        when it is terminating, not served, or `body` is None); those remembered before."""
        meta = (body or {}).get("metadata") or {}
        before = self.namespace_labels.pop(name, None)
        served = self.namespaces.serves(self.namespaces.known(name))
        if body is not None and served and not meta.get("deletionTimestamp"):
            self.namespace_labels[name] = dict(meta.get("labels") or {})
        return before

    def forget_namespace(self, namespace: str) -> None:
        """Drop everything scheduled or remembered for `namespace` (it moved shards)."""
        self.namespace_labels.pop(namespace, None)
        tables = (self.due, self.task_due, self.declared, self.reported, self.phases)
        for table in (*tables, self.low_since, self.scale_due, self.counts_due):
            for key in [key for key in table if key[0] == namespace]:
                del table[key]
        self.open_tasks.forget_namespace(namespace)

    def lock(self, namespace: str, name: str) -> asyncio.Lock:
        lock = self.locks.get((namespace, name))
        if lock is None:
            lock = self.locks[(namespace, name)] = asyncio.Lock()
        return lock


def stamp(path: str) -> tuple[int, int, int] | None:
    """A file's identity and change time (None: no such file, or no path)."""
    if not path:
        return None
    try:
        found = os.stat(path)
    except OSError:
        return None
    return (found.st_ino, found.st_mtime_ns, found.st_size)
