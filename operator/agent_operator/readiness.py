"""A Deployment's readiness told in its owner's status, without a full reconcile.

A Deployment whose replica counts changed brings only its owner's phase, counts and Ready
condition up to date, from the Deployment the event carries: one read of the instance,
a status write when something changed. A change of the pod count alone (a pod created
and not yet Ready: the phase, the ready count and the Ready condition say what they
said) is held back for `replicas_settle_seconds`: the pod's readiness, moments later,
writes it with the rest, so a new org's status is written twice (with its token once the
children are applied, then on Ready). A count that stays (a pod that does not get Ready)
is written when that time is up, from the Deployment as it is then: the scale
subresource's counts are never behind for longer.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from agent_operator import builders, metrics
from agent_operator.instance_status import counts_only, dump_status, readiness_status
from agent_operator.reconcile import GROUP_VERSION, write_status
from agent_operator.state import State
from humanwork_core.resources import AgentInstance, AgentInstancePhase


def held(state: State, key: tuple[str, str], counts: tuple[int, int], now: datetime) -> bool:
    """Whether the owner `key`'s Deployment's new (replicas, readyReplicas) differ from what
    its status shows in the pod count alone, for an owner this process reconciled in
    full: then the write is held back (True) without reading the owner, for the ready
    count, and with it the phase and the Ready condition, is what it reported."""
    reported = state.reported.get(key)
    settle = state.settings.replicas_settle_seconds
    if settle <= 0 or reported is None or not state.applied.get(key):
        return False
    if counts[1] != reported[1] or counts[0] == reported[0]:
        return False
    state.counts_due.setdefault(key, now + timedelta(seconds=settle))
    return True


async def refresh(
    state: State,
    key: tuple[str, str],
    deployment: dict[str, Any] | None,
    now: datetime,
    *,
    hold: bool = True,
) -> bool:
    """Bring the owner `key`'s status up to date with `deployment` (None: read it now,
    and write whatever changed, the settle time being up). True when the owner needs a
    full reconcile instead: this process has not reconciled it in full yet, or it has
    no token, or it was refused. The caller holds the owner's lock."""
    ns, name = key
    fresh = await state.kube.get(GROUP_VERSION, "AgentInstance", ns, name)
    if fresh is None or fresh["metadata"].get("deletionTimestamp"):
        return False
    instance = AgentInstance.model_validate(fresh)
    old = instance.status
    if (
        not state.applied.get(key)
        or old is None
        or old.token is None
        or old.phase == AgentInstancePhase.FAILED
    ):
        return True
    if deployment is None:
        deployment = await state.kube.get(
            "apps/v1", "Deployment", ns, builders.agent_name(instance)
        )
        if deployment is None:  # deleted meanwhile: its DELETED event reconciles in full
            return False
    status = dump_status(readiness_status(instance, deployment, now))
    before = dump_status(old)
    settle = state.settings.replicas_settle_seconds
    if hold and settle > 0 and counts_only(before, status):
        # the pod count alone moved: its readiness will soon say the rest
        state.counts_due.setdefault(key, now + timedelta(seconds=settle))
        return False
    state.counts_due.pop(key, None)
    if status != before:
        await write_status(state.kube, ns, name, status)
    state.reported[key] = (status.get("replicas", 0), status.get("readyReplicas", 0))
    state.phases[key] = str(status.get("phase") or "Pending")
    metrics.RECONCILES.labels(trigger="readiness", result="ok").inc()
    return False
