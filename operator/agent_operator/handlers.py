"""The kopf handlers: thin, each hands an AgentInstance to `reconcile` and reports.

- create / update / resume of an AgentInstance reconciles it, and so does the operator's
  scheduler when its token is due for rotation or its periodic resync comes;
- an event on any child the operator manages (deleted or edited by hand, or a Deployment
  whose readiness changed) reconciles its owner, which restores the child;
- the DELETED event of an AgentInstance records its tokens as revoked (no finalizer: a
  deletion never waits for the operator; the children go by garbage collection).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import kopf

from agent_operator import builders, metrics
from agent_operator.builders import MANAGED_BY
from agent_operator.config import OperatorSettings
from agent_operator.kube import Kube, KubeError
from agent_operator.reconcile import (
    GROUP_VERSION,
    Keyring,
    ensure_keyring,
    reconcile,
    revoke,
    seconds_until_rotation,
)

GROUP, VERSION = GROUP_VERSION.split("/")
INSTANCES = (GROUP, VERSION, "agentinstances")
CHILD_KINDS = (
    ("", "v1", "serviceaccounts"),
    ("", "v1", "secrets"),
    ("", "v1", "configmaps"),
    ("", "v1", "services"),
    ("rbac.authorization.k8s.io", "v1", "roles"),
    ("rbac.authorization.k8s.io", "v1", "rolebindings"),
    ("networking.k8s.io", "v1", "networkpolicies"),
    ("apps", "v1", "deployments"),
)
CHILD_LABELS = {"app.kubernetes.io/managed-by": MANAGED_BY, "app.kubernetes.io/component": "agent"}
KOPF_PREFIX = f"kopf.{GROUP}"
RESYNC_SECONDS = 30.0
SCHEDULER_TICK_SECONDS = 1.0
LOG = logging.getLogger("humanwork.operator")


class State:
    """What the handlers share, kept in kopf's memo."""

    def __init__(self, kube: Kube, settings: OperatorSettings, keyring: Keyring) -> None:
        self.kube = kube
        self.settings = settings
        self.keyring = keyring
        self.locks: dict[tuple[str, str], asyncio.Lock] = {}
        # when each known instance is next due: (time, trigger), trigger rotation or resync
        self.due: dict[tuple[str, str], tuple[datetime, str]] = {}
        self.scheduler: asyncio.Task[None] | None = None

    def lock(self, namespace: str, name: str) -> asyncio.Lock:
        return self.locks.setdefault((namespace, name), asyncio.Lock())


def _state(memo: kopf.Memo) -> State:
    state = memo.get("state")
    if not isinstance(state, State):
        raise kopf.TemporaryError("the operator is still starting", delay=1)
    return state


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    # kopf's bookkeeping goes to annotations (the structural status schema has no room for
    # it), under a prefix of its own: kopf ignores changes to annotations with its prefix,
    # and humanwork.io/rotate-token must not be ignored
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=KOPF_PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=KOPF_PREFIX)
    settings.posting.level = logging.WARNING  # our own Events, plus kopf's warnings/errors
    settings.watching.server_timeout = 300
    settings.batching.worker_limit = 200
    op_settings = OperatorSettings.from_env(os.environ)
    kube = await Kube.connect()
    keyring = await ensure_keyring(kube, op_settings, _utcnow())
    state = State(kube, op_settings, keyring)
    state.scheduler = asyncio.create_task(_schedule(state), name="humanwork-scheduler")
    memo["state"] = state
    port = int(os.environ.get("HUMANWORK_OPERATOR_METRICS_PORT", "9090"))
    if port:
        metrics.serve(port, os.environ.get("HUMANWORK_OPERATOR_METRICS_ADDRESS", "0.0.0.0"))


@kopf.on.cleanup()
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    state = memo.get("state")
    if isinstance(state, State):
        if state.scheduler:
            state.scheduler.cancel()
        await state.kube.close()


def _utcnow() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


async def _reconcile(state: State, body: dict[str, Any], trigger: str) -> None:
    meta = body["metadata"]
    ns, name = meta["namespace"], meta["name"]
    async with state.lock(ns, name):
        fresh = await state.kube.get(GROUP_VERSION, "AgentInstance", ns, name)
        if fresh is None or fresh["metadata"].get("deletionTimestamp"):
            return
        started = time.monotonic()
        try:
            state.keyring = await ensure_keyring(state.kube, state.settings, _utcnow())
            outcome = await reconcile(state.kube, state.settings, state.keyring, fresh)
        except KubeError as exc:
            metrics.ERRORS.labels(reason=exc.reason or str(exc.status)).inc()
            metrics.RECONCILES.labels(trigger=trigger, result="error").inc()
            if exc.status == 409:
                raise kopf.TemporaryError(f"conflict, retrying: {exc}", delay=1) from exc
            raise kopf.TemporaryError(str(exc), delay=5) from exc
        finally:
            metrics.DURATION.observe(time.monotonic() - started)
    metrics.RECONCILES.labels(trigger=trigger, result="ok").inc()
    rotation_in = seconds_until_rotation({**fresh, "status": outcome.status}, _utcnow())
    if rotation_in is not None and rotation_in < RESYNC_SECONDS:
        state.due[(ns, name)] = (_utcnow() + timedelta(seconds=rotation_in), "rotation")
    else:
        state.due[(ns, name)] = (_utcnow() + timedelta(seconds=RESYNC_SECONDS), "resync")
    for event in outcome.events:
        if event.reason in ("TokenIssued", "TokenRotated"):
            metrics.ROTATIONS.labels(reason=event.reason).inc()
        await state.kube.create(
            builders.event(fresh, event.reason, event.message, warning=event.warning, now=_utcnow())
        )


@kopf.on.resume(*INSTANCES)
@kopf.on.create(*INSTANCES)
@kopf.on.update(*INSTANCES)
async def instance_changed(body: kopf.Body, memo: kopf.Memo, reason: Any, **_: Any) -> None:
    await _reconcile(_state(memo), dict(body), trigger=str(reason))


@kopf.on.event(*INSTANCES)
async def instance_event(
    event: kopf.RawEvent, body: kopf.Body, memo: kopf.Memo, logger: kopf.Logger, **_: Any
) -> None:
    if event.get("type") != "DELETED":
        return
    state = _state(memo)
    state.due.pop((body["metadata"]["namespace"], body["metadata"]["name"]), None)
    revoked = await revoke(state.kube, state.settings, dict(body))
    metrics.REVOCATIONS.inc(len(revoked))
    logger.info(f"revoked tokens {', '.join(revoked) or '(none issued)'}")


async def _schedule(state: State) -> None:
    """Reconcile each known instance when its token is due for rotation (each due time
    carries its own deterministic jitter, so many orgs never rotate in the same second) and
    otherwise every RESYNC_SECONDS. A loop of the operator's own rather than kopf timers or
    daemons, which would put a finalizer on every AgentInstance: deleting one must never
    wait for the operator."""
    while True:
        now = _utcnow()
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
        await asyncio.sleep(SCHEDULER_TICK_SECONDS)


def _owner(body: kopf.Body) -> tuple[str, str] | None:
    for ref in body.get("metadata", {}).get("ownerReferences") or []:
        if ref.get("kind") == "AgentInstance" and ref.get("apiVersion", "").startswith(GROUP):
            return body["metadata"]["namespace"], ref["name"]
    return None


async def child_event(event: kopf.RawEvent, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    """A managed child changed or went away: reconcile its owner (restoring the child)."""
    if event.get("type") not in ("MODIFIED", "DELETED"):
        return  # the initial listing and our own creations need nothing
    owner = _owner(body)
    if owner is None:
        return
    ns, name = owner
    if event.get("type") == "DELETED":
        metrics.DRIFT.labels(kind=str(body.get("kind", "?"))).inc()
    await _reconcile(_state(memo), {"metadata": {"namespace": ns, "name": name}}, "child")


for _group, _version, _plural in CHILD_KINDS:
    kopf.on.event(_group, _version, _plural, labels=CHILD_LABELS)(child_event)
