"""The kopf handlers: thin, each hands an AgentInstance to `reconcile` and reports.

- an AgentInstance of this operator's shard (`agent_operator.shards`) whose declared spec,
  labels or annotations changed, or that the operator sees for the first time, is
  queued for a full reconcile (no kopf bookkeeping is written on it), worked by the
  operator's own reconcilers in the order asked (:mod:`agent_operator.workqueue`), so the
  handler leaves kopf's slot at once; one whose token is due for rotation or whose
  periodic resync comes is reconciled by the operator's scheduler;
- events of namespaces, instances, tasks and children of other shards are dropped before
  anything is read or written;
- the children's events come from the operator's own watches (the agents' Deployments
  of this shard's alone: :mod:`agent_operator.child_watch`), not kopf's; a Deployment
  whose replica counts changed brings only its owner's phase, counts and Ready
  condition up to date (one read, a
  status write when something changed; a change of the pod count alone waits a moment
  for the pod's readiness: :mod:`agent_operator.readiness`);
- an event on any child the operator manages deleted or edited by hand reconciles its
  owner, which restores the child; Secrets are
  not watched (a cluster-wide watch needs a cluster-wide `list`, and the operator reads
  Secrets only in org namespaces): a deleted or edited token or callback
  Secret is restored at the instance's next reconcile, at the latest its periodic resync;
- the DELETED event of an AgentInstance records its tokens as revoked (no finalizer: a
  deletion never waits for the operator; the children go by garbage collection);
- an AgentInstance with `spec.autoscaling` is scaled with its open tasks
  (:mod:`agent_operator.autoscale`) after each of its reconciles, whenever a task of its
  opens or ends, and when a scale-down's cooldown is over.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import kopf

from agent_operator import autoscale, builders, metrics, readiness
from agent_operator.child_watch import CHILD_SELECTOR, ChildWatch, deployment_selector
from agent_operator.config import OperatorSettings
from agent_operator.kube import Kube, KubeError
from agent_operator.memories import EventsOnlyDiffBase, EventsOnlyProgress
from agent_operator.reconcile import (
    GROUP_VERSION,
    ensure_keyring,
    foreign_writers,
    reconcile,
    revoke,
    seconds_until_rotation,
)
from agent_operator.shards import SHARD_LABEL, fingerprint, label_selector, shard_of, trigger_for
from agent_operator.state import Job, State, stamp
from agent_operator.tasks import reconcile_task
from agent_operator.workqueue import WorkQueue, run_due
from humanwork_core import tracing
from humanwork_core.resources import ORG_ID_LABEL, AgentInstance, names

__all__ = ["State", "child_changed", "instance_event", "namespace_event", "watch_selectors"]

GROUP, VERSION = GROUP_VERSION.split("/")
INSTANCES = (GROUP, VERSION, names.INSTANCES)
TASKS = (GROUP, VERSION, names.TASKS)
CHILD_KINDS = (
    ("v1", "ServiceAccount"),
    ("v1", "ConfigMap"),
    ("v1", "Service"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
)
"""The children watched (by the operator's own watches, :mod:`agent_operator.child_watch`,
not kopf's) for a deletion or a stranger's edit; the agents' Deployments too, this shard's
alone, for their readiness (:func:`deployment_event`)."""
NAMESPACES = ("", "v1", "namespaces")
KOPF_PREFIX = f"kopf.{GROUP}"
ACTED = ("MODIFIED", "DELETED")
"""The children's events the operator acts on (an ADDED one is its own creation)."""
RESYNC_SECONDS = 300.0
SCHEDULER_TICK_SECONDS = 1.0
KEYRING_SECONDS = 60.0
WORKERS = 200
"""kopf's per-object workers running at once (a full reconcile runs outside them)."""
RECONCILERS = 16
"""Full reconciles running at once (the operator's own queue, in the order asked)."""
IDLE_SECONDS = 0.5
"""How long an object's kopf worker waits for its next event before leaving its slot."""
LOG = logging.getLogger("humanwork.operator")


def _state(memo: kopf.Memo) -> State:
    state = memo.get("state")
    if not isinstance(state, State):
        raise kopf.TemporaryError("the operator is still starting", delay=1)
    return state


def watch_selectors() -> dict[tuple[str, str, str], str]:
    """The label selectors the API server applies to kopf's watches, the same as the
    handlers' label filters: the org namespaces alone. (The children's watches select
    the operator's own children, :data:`agent_operator.child_watch.CHILD_SELECTOR`: every
    namespace gets a ServiceAccount and a ConfigMap of its own, and 9,000 orgs of another
    shard were about 36,000 events to drop without it.)"""
    return {NAMESPACES: label_selector({ORG_ID_LABEL: None})}


@kopf.on.login()
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """kopf's own readers (in a pod the ServiceAccount, elsewhere the kubeconfig), also
    where an official client is installed (the development venv), which kopf would
    otherwise log in through: the same login as in the image, which holds neither."""
    return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    # kopf's bookkeeping goes to annotations (the structural status schema has no room for
    # it), under a prefix of its own: kopf ignores changes to annotations with its prefix,
    # and humanwork.io/rotate-token must not be ignored
    settings.persistence.progress_storage = EventsOnlyProgress(prefix=KOPF_PREFIX)
    settings.persistence.diffbase_storage = EventsOnlyDiffBase(prefix=KOPF_PREFIX)
    settings.posting.level = logging.WARNING  # our own Events, plus kopf's warnings/errors
    if not LOG.isEnabledFor(logging.DEBUG):
        # no "Handler ... succeeded." record for each of the dozen events an org brings
        # (and each of another shard's org); warnings and errors still come
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    settings.watching.server_timeout = 300
    # at most WORKERS objects' events handled at once; a worker leaves its slot once its
    # object has been quiet for IDLE_SECONDS (kopf's 5 s let a burst of 9,000 other shards'
    # objects wait minutes for a slot, holding their events)
    settings.queueing.worker_limit = WORKERS
    settings.queueing.idle_timeout = IDLE_SECONDS
    for kind, selector in watch_selectors().items():
        settings.watching.label_selectors[kind] = selector
    op_settings = OperatorSettings.from_env(os.environ)
    kube = await Kube.connect()
    keyring = await ensure_keyring(kube, op_settings, _utcnow())
    state = State(kube, op_settings, keyring)
    state.queue = WorkQueue(lambda key, job: _run_job(state, key, job), RECONCILERS)
    state.queue.start()
    state.scheduler = asyncio.create_task(_schedule(state), name="humanwork-scheduler")
    state.watches = [
        ChildWatch(kube, version, kind, CHILD_SELECTOR, partial(child_changed, state), types=ACTED)
        for version, kind in CHILD_KINDS
    ]
    selector = deployment_selector(op_settings.shard)
    handle = partial(deployment_event, state)
    state.watches.append(ChildWatch(kube, "apps/v1", "Deployment", selector, handle, types=ACTED))
    for watch in state.watches:
        watch.start()
    memo["state"] = state
    metrics.INSTANCES.source = state.phases.values
    metrics.OPEN_TASKS.source = state.open_tasks.counts
    metrics.LEADER.set(1)
    port = int(os.environ.get("HUMANWORK_OPERATOR_METRICS_PORT", "9090"))
    if port:
        metrics.serve(port, os.environ.get("HUMANWORK_OPERATOR_METRICS_ADDRESS", "0.0.0.0"))


@kopf.on.cleanup()
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    metrics.LEADER.set(0)
    state = memo.get("state")
    if isinstance(state, State):
        if state.scheduler:
            state.scheduler.cancel()
        for watch in state.watches:
            await watch.stop()
        if state.queue is not None:  # (an empty queue is falsy)
            await state.queue.stop()
        await state.kube.close()
    stop = memo.get("stop")  # see agent_operator.main._operate
    if isinstance(stop, asyncio.Future) and not stop.done():
        stop.set_result(None)


def _utcnow() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


async def _reconcile(
    state: State, body: dict[str, Any], trigger: str, *, seen_first: bool = False
) -> None:
    """Reconcile one instance in full: read it (unless `body` is the watch's own copy of an
    instance this process never wrote to), apply what changed, report, autoscale."""
    meta = body["metadata"]
    ns, name = meta["namespace"], meta["name"]
    async with state.lock(ns, name):
        fresh = body if seen_first else None
        if fresh is None:
            fresh = await state.kube.get(GROUP_VERSION, "AgentInstance", ns, name)
        if fresh is None or fresh["metadata"].get("deletionTimestamp"):
            return
        started = time.monotonic()
        try:
            if trigger == "resync":
                state.applied.forget(ns, name)  # a full re-apply now and then
            outcome = await reconcile(
                state.kube,
                state.settings,
                state.keyring,
                fresh,
                applied=state.applied,
                endpoints=state.endpoints,
                namespace_labels=state.namespace_labels,
            )
        except KubeError as exc:
            metrics.ERRORS.labels(reason=exc.reason or str(exc.status)).inc()
            metrics.RECONCILES.labels(trigger=trigger, result="error").inc()
            if exc.status == 409:
                raise kopf.TemporaryError(f"conflict, retrying: {exc}", delay=1) from exc
            raise kopf.TemporaryError(str(exc), delay=5) from exc
        finally:
            metrics.DURATION.observe(time.monotonic() - started)
            state.active()
    metrics.RECONCILES.labels(trigger=trigger, result="ok").inc()
    state.counts_due.pop((ns, name), None)  # the status just written holds the counts
    counts = (outcome.status.get("replicas", 0), outcome.status.get("readyReplicas", 0))
    state.reported[(ns, name)] = counts
    state.phases[(ns, name)] = str(outcome.status.get("phase") or "Pending")
    rotation_in = seconds_until_rotation({**fresh, "status": outcome.status}, _utcnow())
    if rotation_in is not None and rotation_in < RESYNC_SECONDS:
        state.due[(ns, name)] = (_utcnow() + timedelta(seconds=rotation_in), "rotation")
    else:
        state.due[(ns, name)] = (_utcnow() + timedelta(seconds=RESYNC_SECONDS), "resync")
    for event in outcome.events:
        if event.token:
            metrics.ROTATIONS.labels(reason=event.token).inc()
        await _post(state, fresh, event.reason, event.message, warning=event.warning)
    if (fresh.get("spec") or {}).get("autoscaling") or (ns, name) in state.low_since:
        await _autoscale(state, (ns, name))


async def _post(
    state: State, about: dict[str, Any], reason: str, message: str, *, warning: bool
) -> None:
    """Post an Event about `about` (its answer, the Event as stored, is not read)."""
    event = builders.event(
        about, reason, message, warning=warning, now=_utcnow(), reporter=state.settings.replica
    )
    await state.kube.create(event, answer=False)


async def _autoscale(state: State, key: tuple[str, str]) -> None:
    """Scale one AgentInstance with its open tasks, if it asks for autoscaling."""
    ns, name = key
    async with state.lock(f"scale:{ns}", name):
        fresh = await state.kube.get(GROUP_VERSION, "AgentInstance", ns, name)
        if fresh is None or fresh["metadata"].get("deletionTimestamp"):
            return
        now = _utcnow()
        spec = AgentInstance.model_validate(fresh).spec
        scaled = await autoscale.autoscale(
            state.kube,
            fresh,
            spec,
            state.open_tasks.count(ns, name),
            state.low_since.get(key),
            now,
            state.settings.scale_down_cooldown_seconds,
        )
    decision = scaled.decision
    if decision is not None and decision.low_since is not None:
        state.low_since[key] = decision.low_since
        cooldown = timedelta(seconds=state.settings.scale_down_cooldown_seconds)
        state.scale_due[key] = decision.low_since + cooldown
    else:
        state.low_since.pop(key, None)
        state.scale_due.pop(key, None)
    if scaled.event is not None:
        metrics.SCALINGS.inc()
        await _post(state, fresh, scaled.event.reason, scaled.event.message, warning=False)


@kopf.on.event(*INSTANCES)
async def instance_event(event: kopf.RawEvent, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    """An AgentInstance of this shard appeared, changed what it declares, or went away."""
    state = _state(memo)
    state.active()
    key = (body["metadata"]["namespace"], body["metadata"]["name"])
    if not await state.serves(key[0]):
        return
    if event.get("type") == "DELETED":
        await _instance_deleted(state, key, dict(body))
        return
    declared = fingerprint(body, KOPF_PREFIX)
    if state.declared.get(key) == declared:
        return  # our own status write, or nothing the operator acts on
    known = key in state.declared
    state.declared[key] = declared
    assert state.queue is not None  # set at startup, before any event
    # worked by the operator's own reconcilers, so this slot is free again at once
    state.queue.add(key, Job(dict(body), trigger_for(event.get("type"), known), not known))


async def _run_job(state: State, key: tuple[str, str], job: Job) -> None:
    """One full reconcile from the queue; a failed one is tried again by the scheduler in
    2 s (and by the instance's next event that changes what it declares)."""
    try:
        await _reconcile(state, job.body, trigger=job.trigger, seen_first=job.seen_first)
    except Exception as exc:
        LOG.warning("reconcile of %s/%s (%s) failed: %s", key[0], key[1], job.trigger, exc)
        state.due[key] = (_utcnow() + timedelta(seconds=2), job.trigger)


async def _instance_deleted(state: State, key: tuple[str, str], body: dict[str, Any]) -> None:
    """Record the deleted instance's tokens as revoked and forget it."""
    if state.queue is not None:
        state.queue.discard(key)
    state.due.pop(key, None)
    state.reported.pop(key, None)
    state.phases.pop(key, None)
    state.declared.pop(key, None)
    state.low_since.pop(key, None)
    state.scale_due.pop(key, None)
    state.counts_due.pop(key, None)
    state.applied.forget(*key)
    revoked = await revoke(state.kube, state.settings, body)
    metrics.REVOCATIONS.inc(len(revoked))
    LOG.info("%s/%s: revoked tokens %s", *key, ", ".join(revoked) or "(none issued)")


async def _schedule(state: State) -> None:
    """Reconcile each known instance when its token is due for rotation (each due time
    carries its own deterministic jitter, so many orgs never rotate in the same second) and
    otherwise every RESYNC_SECONDS. A loop of the operator's own rather than kopf timers or
    daemons, which would put a finalizer on every AgentInstance: deleting one must never
    wait for the operator."""
    keys_checked = time.monotonic()
    while True:
        now = _utcnow()
        if time.monotonic() - keys_checked > KEYRING_SECONDS:
            # publish the keys that may still verify a live token, drop expired ones
            keys_checked = time.monotonic()
            try:
                state.keyring = await ensure_keyring(state.kube, state.settings, now)
            except Exception as exc:
                LOG.warning("refreshing the signing keys failed: %s", exc)
        _platform_ca_changed(state, now)
        await run_due(state.task_due, now, lambda key: _reconcile_task(state, key), "tick of task")
        await run_due(state.scale_due, now, lambda key: _autoscale(state, key), "autoscaling")
        await run_due(state.counts_due, now, lambda key: _readiness(state, key, None), "counts")
        for key, (when, trigger) in list(state.due.items()):
            if when > now or state.due.get(key) != (when, trigger):
                continue
            del state.due[key]
            try:
                await _reconcile(
                    state, {"metadata": {"namespace": key[0], "name": key[1]}}, trigger
                )
            except Exception as exc:  # one instance's trouble must not stop the others
                LOG.warning("reconcile of %s/%s (%s) failed: %s", key[0], key[1], trigger, exc)
                state.due.setdefault(key, (now + timedelta(seconds=5), trigger))
        state.heap.tick()  # a burst is over, or a steady load's holes: give them back
        await asyncio.sleep(SCHEDULER_TICK_SECONDS)


def _platform_ca_changed(state: State, now: datetime) -> None:
    """When the platform CA file changed (the kubelet updated the operator's ConfigMap
    volume), every known instance is reconciled at once: their CA ConfigMaps follow."""
    now_stamp = stamp(state.settings.platform_ca_file)
    if now_stamp == state.platform_ca_stamp:
        return
    state.platform_ca_stamp = now_stamp
    LOG.info("the platform CA changed: re-applying it for %d agents", len(state.due))
    for key in list(state.due):
        state.due[key] = (now, "platform-ca")


async def _reconcile_task(state: State, key: tuple[str, str]) -> None:
    ns, name = key
    async with state.lock(f"task:{ns}", name):
        fresh = await state.kube.get(GROUP_VERSION, "AgenticTask", ns, name)
        if fresh is None or fresh["metadata"].get("deletionTimestamp"):
            state.task_due.pop(key, None)
            return
        try:
            with _task_span(fresh) as current:
                outcome = await reconcile_task(state.kube, state.settings, fresh, _utcnow())
                phase = str((outcome.status or {}).get("phase") or "")
                tracing.annotate(current, {"humanwork.task.phase": phase})
        except KubeError as exc:
            metrics.TASK_RECONCILES.labels(result="error").inc()
            metrics.ERRORS.labels(reason=exc.reason or str(exc.status)).inc()
            raise kopf.TemporaryError(str(exc), delay=2 if exc.status == 409 else 5) from exc
    metrics.TASK_RECONCILES.labels(result="ok").inc()
    await _count_task(state, key, fresh, None if outcome.deleted else outcome.status)
    if outcome.deleted:
        state.task_due.pop(key, None)
        return
    if outcome.wake_at is not None:
        state.task_due[key] = outcome.wake_at
    else:
        state.task_due.pop(key, None)
    for event in outcome.events:
        await _post(state, fresh, event.reason, event.message, warning=event.warning)


def _task_span(task: dict[str, Any]) -> contextlib.AbstractContextManager[Any]:
    """`humanwork.reconcile_task` in the task's trace (its `humanwork.io/traceparent`)."""
    meta = task["metadata"]
    attributes = {"humanwork.task": f"{meta['namespace']}/{meta['name']}"}
    parent = tracing.context_from_annotations(meta.get("annotations"))
    return tracing.span("humanwork.reconcile_task", attributes, parent=parent)


@kopf.on.event(*TASKS)
async def task_event(event: kopf.RawEvent, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    """Any change of a task (its creation, the platform's decisions, the agent's executions)
    and the operator's start: tick it. The operator's own writes echo back as a no-op."""
    key = (body["metadata"]["namespace"], body["metadata"]["name"])
    state = _state(memo)
    state.active()
    if not await state.serves(key[0]):
        return
    if event.get("type") == "DELETED":
        state.task_due.pop(key, None)
        await _count_task(state, key, dict(body), None)
        return
    await _reconcile_task(state, key)


async def _count_task(
    state: State, key: tuple[str, str], task: dict[str, Any], status: dict[str, Any] | None
) -> None:
    """Count the task open or not (None: gone) for its agent; rescale the agent whose count
    of open tasks changed."""
    agent = str(((task.get("spec") or {}).get("agentRef") or {}).get("name") or "")
    is_open = status is not None and autoscale.task_is_open(status)
    changed = state.open_tasks.update(key, agent, is_open)
    if changed is not None:
        await _autoscale(state, changed)


def _owner(body: Mapping[str, Any]) -> tuple[str, str] | None:
    for ref in body.get("metadata", {}).get("ownerReferences") or []:
        if ref.get("kind") == "AgentInstance" and ref.get("apiVersion", "").startswith(GROUP):
            return body["metadata"]["namespace"], ref["name"]
    return None


async def deployment_event(state: State, kind: str, body: dict[str, Any]) -> None:
    """An event of the operator's own watch of this shard's agents' Deployments. One that
    left the watch without being deleted, for it now names another shard (its org moved
    there and that shard's operator applied it), is that shard's."""
    if kind == "DELETED":
        meta = body["metadata"]
        now = await state.kube.get("apps/v1", "Deployment", meta["namespace"], meta["name"])
        shard = ((now or {}).get("metadata", {}).get("labels") or {}).get(SHARD_LABEL)
        if shard is not None and shard != state.settings.shard:
            return
    await child_changed(state, kind, body)


async def child_changed(state: State, kind: str | None, body: Mapping[str, Any]) -> None:
    """A managed child went away or was edited by someone else: reconcile its owner, which
    restores it. A Deployment whose readiness changed refreshes the owner's status."""
    if kind not in ("MODIFIED", "DELETED"):
        return  # the initial listing and our own creations need nothing
    owner = _owner(body)
    if owner is None:
        return
    ns, name = owner
    state.active()
    if not await state.serves(ns):
        return
    strangers = foreign_writers(dict(body)) if kind == "MODIFIED" else set()
    if kind == "DELETED" or strangers:
        metrics.DRIFT.labels(kind=str(body.get("kind", "?"))).inc()
        LOG.info(
            f"{ns}: {body.get('kind')} {body['metadata']['name']} drifted "
            f"({'deleted' if kind == 'DELETED' else 'edited by ' + ', '.join(sorted(strangers))})"
        )
        state.applied.forget(ns, name)
    elif body.get("kind") != "Deployment":
        return  # our own write echoing back
    else:
        status = body.get("status") or {}
        counts = (int(status.get("replicas") or 0), int(status.get("readyReplicas") or 0))
        if state.reported.get((ns, name)) == counts:
            return  # nothing the owner's status shows has changed
        if readiness.held(state, owner, counts, _utcnow()):
            return  # the pod count alone moved: its readiness will soon say the rest
        await _readiness(state, owner, dict(body))
        return
    await _reconcile(state, {"metadata": {"namespace": ns, "name": name}}, "child")


async def _readiness(state: State, key: tuple[str, str], deployment: dict[str, Any] | None) -> None:
    """The owner's Deployment changed its replica counts (None: a held-back count is due):
    its status follows (:mod:`agent_operator.readiness`), or a full reconcile when this
    process has not reconciled it in full yet, or refused it."""
    async with state.lock(*key):
        full = await readiness.refresh(
            state, key, deployment, _utcnow(), hold=deployment is not None
        )
    if full:
        await _reconcile(state, {"metadata": {"namespace": key[0], "name": key[1]}}, "child")


async def namespace_event(event: kopf.RawEvent, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    """An org namespace appeared, changed its labels or went away. Moved into this shard:
    adopt its instances and tasks; moved out: forget them; its org label changed:
    reconcile the instances it holds at once (an org label that no longer matches stops
    the operator from serving them)."""
    state = _state(memo)
    state.active()
    ns = body["metadata"]["name"]
    kind = event.get("type")
    if kind == "DELETED" and body["metadata"].get("deletionTimestamp"):
        state.namespaces.learn(ns, None)
        state.forget_namespace(ns)
        return
    # a deletion without deletionTimestamp is the namespace leaving the watch's label
    # selector (its org label was taken away), an addition without a listing one joining
    # it: both are label changes, handled below like any other
    before = state.namespaces.learn(ns, shard_of(body))
    # (a namespace leaving the watch is read again at its instances' reconcile)
    labels_before = state.see_namespace(ns, None if kind == "DELETED" else dict(body))
    served = state.namespaces.serves(state.namespaces.known(ns))
    if not served:
        if state.namespaces.serves(before):
            LOG.info("namespace %s left this shard", ns)
            state.forget_namespace(ns)
        return
    if before is not None and not state.namespaces.serves(before):
        LOG.info("namespace %s joined this shard", ns)
        await _adopt(state, ns)
        return
    if kind is None:
        return  # the initial listing: the instances' own listing reconciles them
    if kind != "DELETED" and labels_before and not _labels_matter(labels_before, body):
        return  # e.g. the Pod Security labels a reconcile just added
    for owner_ns, name in [key for key in state.due if key[0] == ns]:
        await _reconcile(state, {"metadata": {"namespace": owner_ns, "name": name}}, "namespace")


def _labels_matter(before: dict[str, str], body: kopf.Body) -> bool:
    """Whether a served namespace's new labels ask its instances to be reconciled: its org
    label changed, it is terminating, or it lacks Pod Security labels."""
    labels = body["metadata"].get("labels") or {}
    return (
        labels.get(ORG_ID_LABEL) != before.get(ORG_ID_LABEL)
        or bool(body["metadata"].get("deletionTimestamp"))
        or bool(builders.missing_pod_security_labels(labels))
    )


async def _adopt(state: State, ns: str) -> None:
    """Serve a namespace that joined this shard: reconcile each instance, tick each task."""
    for instance in await state.kube.list(GROUP_VERSION, "AgentInstance", ns, ""):
        key = (ns, instance["metadata"]["name"])
        try:
            await _reconcile(state, instance, "adopt")
            state.declared[key] = fingerprint(instance, KOPF_PREFIX)
        except Exception as exc:
            LOG.warning("adopting %s/%s failed: %s", ns, key[1], exc)
            state.due[key] = (_utcnow() + timedelta(seconds=2), "adopt")
    for task in await state.kube.list(GROUP_VERSION, "AgenticTask", ns, ""):
        state.task_due[(ns, task["metadata"]["name"])] = _utcnow()


kopf.on.event(*NAMESPACES, labels={ORG_ID_LABEL: kopf.PRESENT})(namespace_event)
