"""Leader election on a Lease: one active operator per shard, the other replicas on standby.

Every replica of a shard competes for the Lease `coordination.k8s.io/v1`
`<platform namespace>/<lease name>`. The holder renews it every `retry` seconds; a
standby takes it over only when the Lease's record (holder, renew time, version) has not
changed for `duration` seconds *as the standby itself observed* (the rule of client-go's
leader election: no clock is compared across machines). The holder that could not renew
for `renew_deadline` seconds (shorter than `duration`) gives up: it stops its kopf
operator and exits, so it has stopped acting before any standby may take over. A holder
that stops cleanly releases the Lease, and a standby takes over on its next try.

So a killed leader is replaced within `duration + retry` seconds, and two replicas never
act at once unless one was frozen (not killed) for longer than `renew_deadline` and
resumes between two of its checks: the window client-go also has.

:func:`decide` is the pure rule; :class:`Leadership` does the reads and writes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from typing import Any

from agent_operator.kube import Kube, KubeError

log = logging.getLogger(__name__)

LEASE_API = "coordination.k8s.io/v1"


class Move(Enum):
    """What a replica does with the Lease as it sees it."""

    CREATE = "create"
    """No Lease yet: create it, holding it."""
    RENEW = "renew"
    """We hold it: renew it."""
    TAKE = "take"
    """Released, or not renewed for a whole duration as we observed it: take it over."""
    WAIT = "wait"
    """Someone else holds it and renews it."""


@dataclass(frozen=True)
class Observation:
    """A Lease's record and when (on our monotonic clock) we first saw it so."""

    record: tuple[str, str, str]
    """(holder, renewTime, resourceVersion): any change means the holder is alive."""
    since: float


def decide(lease: dict[str, Any] | None, me: str, seen: Observation | None, now: float) -> Move:
    """The move for replica `me`, given the Lease (None: absent), our earliest observation
    of its current record (`seen`, for this same record) and the monotonic time `now`."""
    if lease is None:
        return Move.CREATE
    spec = lease.get("spec") or {}
    holder = str(spec.get("holderIdentity") or "")
    if holder == me:
        return Move.RENEW
    if not holder:
        return Move.TAKE
    duration = int(spec.get("leaseDurationSeconds") or 0)
    if seen is None or seen.record != record_of(lease):
        return Move.WAIT  # a record we have not watched for a whole duration yet
    return Move.TAKE if now - seen.since >= duration else Move.WAIT


def record_of(lease: dict[str, Any]) -> tuple[str, str, str]:
    """The parts of a Lease that change whenever its holder renews it."""
    spec = lease.get("spec") or {}
    return (
        str(spec.get("holderIdentity") or ""),
        str(spec.get("renewTime") or ""),
        str((lease.get("metadata") or {}).get("resourceVersion") or ""),
    )


def _micro(now: datetime) -> str:
    """A Kubernetes MicroTime."""
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_spec(
    lease: dict[str, Any] | None, move: Move, me: str, duration: int, now: datetime
) -> dict[str, Any]:
    """The Lease's spec after `move` (CREATE, RENEW or TAKE) by `me`."""
    spec = dict((lease or {}).get("spec") or {})
    stamp = _micro(now)
    if move is not Move.RENEW:
        spec["acquireTime"] = stamp
        spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (
            1 if move is Move.TAKE else 0
        )
    spec.update(holderIdentity=me, leaseDurationSeconds=duration, renewTime=stamp)
    return spec


@dataclass
class Leadership:
    """Competes for, holds and releases one Lease."""

    kube: Kube
    namespace: str
    name: str
    identity: str
    duration: int = 15
    renew_deadline: int = 10
    retry: float = 2.0
    clock: Callable[[], float] = time.monotonic
    seen: Observation | None = None

    async def try_once(self) -> bool:
        """Read the Lease and make our move; True when we hold it afterwards."""
        lease = await self.kube.get(LEASE_API, "Lease", self.namespace, self.name)
        now = self.clock()
        if lease is not None and (self.seen is None or self.seen.record != record_of(lease)):
            self.seen = Observation(record_of(lease), now)
        move = decide(lease, self.identity, self.seen, now)
        if move is Move.WAIT:
            return False
        spec = lease_spec(lease, move, self.identity, self.duration, datetime.now(UTC))
        try:
            if lease is None:
                await self.kube.create(self._manifest(spec, None))
            else:
                version = str(lease["metadata"]["resourceVersion"])
                await self.kube.replace(self._manifest(spec, version))
        except KubeError as exc:
            if exc.status == 409:
                return False  # another replica moved first
            raise
        if move is Move.TAKE:
            log.info(
                "took over the Lease %s/%s from %r",
                self.namespace,
                self.name,
                record_of(lease or {})[0],
            )
        return True

    def _manifest(self, spec: dict[str, Any], version: str | None) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if version is not None:
            metadata["resourceVersion"] = version
        return {"apiVersion": LEASE_API, "kind": "Lease", "metadata": metadata, "spec": spec}

    async def acquire(self) -> None:
        """Wait until we hold the Lease."""
        while True:
            try:
                if await self.try_once():
                    log.info(
                        "leading as %s (Lease %s/%s)", self.identity, self.namespace, self.name
                    )
                    return
            except KubeError as exc:
                log.warning("could not read or write the Lease: %s", exc)
            await asyncio.sleep(self.retry)

    async def hold(self, lost: asyncio.Event) -> None:
        """Renew the Lease until cancelled; set `lost` and return when it could not be
        renewed for `renew_deadline` seconds or another replica holds it."""
        last = self.clock()
        while True:
            await asyncio.sleep(self.retry)
            try:
                if await self.try_once():
                    last = self.clock()
                    continue
                reason = "another replica holds it"
            except KubeError as exc:
                reason = str(exc)
                if self.clock() - last < self.renew_deadline:
                    log.warning("could not renew the Lease (will retry): %s", reason)
                    continue
            log.error("lost the Lease %s/%s: %s", self.namespace, self.name, reason)
            lost.set()
            return

    async def release(self) -> None:
        """Give the Lease up if we still hold it, so a standby takes over at once."""
        try:
            lease = await self.kube.get(LEASE_API, "Lease", self.namespace, self.name)
            if lease is None or record_of(lease)[0] != self.identity:
                return
            spec = dict(lease.get("spec") or {})
            spec["holderIdentity"] = ""
            version = str(lease["metadata"]["resourceVersion"])
            await self.kube.replace(self._manifest(spec, version))
        except KubeError as exc:
            log.warning("could not release the Lease: %s", exc)
