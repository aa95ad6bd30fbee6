"""Operators of shards of a test's own on the real control plane: each one a process under
the humanwork-operator ServiceAccount (its RBAC is what the tests exercise) serving only
the org namespaces labelled with its shard, so the session's operator (which serves the
namespaces without the label) stays out of the way.

    with shard_operators(cluster, tmp_path, FAST_LEASE) as start:
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

from humanwork_dev.processes import PLATFORM_NS, OperatorProcess
from tests.conftest import Cluster

SHARD_LABEL = "humanwork.io/shard"
"""The org namespace's label that names the shard serving it."""

DURATION, RENEW_DEADLINE, RETRY = 6, 4, 1
FAST_LEASE = {
    "HUMANWORK_OPERATOR_LEASE_DURATION_SECONDS": str(DURATION),
    "HUMANWORK_OPERATOR_LEASE_RENEW_DEADLINE_SECONDS": str(RENEW_DEADLINE),
    "HUMANWORK_OPERATOR_LEASE_RETRY_SECONDS": str(RETRY),
}
"""A Lease short enough for a test to watch a handover (15 s by default)."""

StartShard = Callable[..., OperatorProcess]
"""`start(shard, identity=None, extra=None)`: a started, healthy replica (`identity`
defaults to the shard's name) with the shard's settings and `extra` over the common ones."""


@contextlib.contextmanager
def shard_operators(
    cluster: Cluster, workdir: Path, env: Mapping[str, str] | None = None, tail: int = 0
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
            "HUMANWORK_OPERATOR_SHARD": shard,
            "HUMANWORK_OPERATOR_IDENTITY": identity,
            **(extra or {}),
        }
        proc = OperatorProcess(
            cluster.kubeconfig, cluster.kubectl_path, workdir / identity, settings
        )
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


def lease(cluster: Cluster, name: str) -> dict[str, Any]:
    """The holder and the transitions of a shard's leader Lease (`humanwork-operator-<shard>`)."""
    found = client.CoordinationV1Api(cluster.api).read_namespaced_lease(name, PLATFORM_NS)
    return {
        "holder": found.spec.holder_identity or "",
        "transitions": found.spec.lease_transitions or 0,
    }
