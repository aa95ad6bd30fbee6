"""Operator replicas of a shard of one's own on a real control plane, for the tests and the
benches alike: each one a process under the humanwork-operator ServiceAccount (its RBAC is
what runs) serving only the org namespaces labelled with its shard (`SHARD_LABEL`), so an
operator serving the namespaces without the label stays out of the way. The Lease the
replicas of a shard elect their leader on is set by `lease_env` (`FAST_LEASE`: short enough
to watch a handover) and read by `lease`.

    with shard_operators(kubeconfig, kubectl, workdir, FAST_LEASE) as start:
        armed = start(shard, f"{shard}-a", {"HUMANWORK_TEST_FAULT_POINT": point})
        standby = start(shard, f"{shard}-b")
        ...                      # every replica started here is stopped on the way out
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from kubernetes import client

from agent_operator.config import ENV_PREFIX, OperatorSettings
from agent_operator.shards import SHARD_LABEL as SHARD_LABEL  # the operator's, for the callers
from humanwork_dev.processes import PLATFORM_NS, OperatorProcess


def lease_env(duration: int, renew_deadline: int, retry: int) -> dict[str, str]:
    """The operator's settings of its Lease (seconds), as its environment."""
    return {
        f"{ENV_PREFIX}LEASE_DURATION_SECONDS": str(duration),
        f"{ENV_PREFIX}LEASE_RENEW_DEADLINE_SECONDS": str(renew_deadline),
        f"{ENV_PREFIX}LEASE_RETRY_SECONDS": str(retry),
    }


DURATION, RENEW_DEADLINE, RETRY = 6, 4, 1
FAST_LEASE = lease_env(DURATION, RENEW_DEADLINE, RETRY)
"""A Lease short enough to watch a handover (15 s by default)."""

StartShard = Callable[..., OperatorProcess]
"""`start(shard, identity=None, extra=None)`: a started, healthy replica (`identity`
defaults to the shard's name) with the shard's settings and `extra` over the common ones."""


def lease_name(shard: str) -> str:
    """The name of the Lease the replicas of `shard` elect their leader on."""
    return OperatorSettings(shard=shard).lease


@contextlib.contextmanager
def shard_operators(
    kubeconfig: str,
    kubectl: str,
    workdir: Path,
    env: Mapping[str, str] | None = None,
    tail: int = 0,
) -> Iterator[StartShard]:
    """A function that starts an operator replica of a shard (its files under
    `workdir/<identity>`, `env` for every replica); all are stopped on the way out and
    the last `tail` lines of each one's log printed."""
    started: list[OperatorProcess] = []

    def start(
        shard: str, identity: str | None = None, extra: Mapping[str, str] | None = None
    ) -> OperatorProcess:
        identity = identity or shard
        settings = {
            **(env or {}),
            f"{ENV_PREFIX}SHARD": shard,
            f"{ENV_PREFIX}IDENTITY": identity,
            **(extra or {}),
        }
        proc = OperatorProcess(kubeconfig, kubectl, workdir / identity, settings)
        started.append(proc)
        proc.start()
        return proc

    try:
        yield start
    finally:
        for proc in started:
            proc.stop()
        for proc in started:
            if proc in OperatorProcess.started:
                OperatorProcess.started.remove(proc)
            if tail:
                print(proc.tail(tail))


def lease(api: client.ApiClient, name: str) -> dict[str, Any]:
    """The holder and the transitions of the Lease `name` (`lease_name`); raises the
    client's `ApiException` (404) before any replica made it."""
    found = client.CoordinationV1Api(api).read_namespaced_lease(name, PLATFORM_NS)
    spec = found.spec if found.spec is not None else client.V1LeaseSpec()
    return {"holder": spec.holder_identity or "", "transitions": spec.lease_transitions or 0}
