"""Operators of shards of a test's own on the test session's control plane: the shared
`humanwork_dev.shards` (which the benches use too) bound to the session's `Cluster`, so a
test says `shard_operators(cluster, tmp_path, FAST_LEASE)` and `lease(cluster, name)`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from humanwork_dev import shards
from humanwork_dev.shards import DURATION, FAST_LEASE, RENEW_DEADLINE, RETRY, SHARD_LABEL
from tests.conftest import Cluster

__all__ = [
    "DURATION",
    "FAST_LEASE",
    "RENEW_DEADLINE",
    "RETRY",
    "SHARD_LABEL",
    "lease",
    "shard_operators",
]


@contextlib.contextmanager
def shard_operators(
    cluster: Cluster, workdir: Path, env: Mapping[str, str] | None = None, tail: int = 0
) -> Iterator[shards.StartShard]:
    """`humanwork_dev.shards.shard_operators` on the session's cluster."""
    with shards.shard_operators(
        cluster.kubeconfig, cluster.kubectl_path, workdir, env, tail
    ) as start:
        yield start


def lease(cluster: Cluster, name: str) -> dict[str, Any]:
    """The holder and the transitions of a shard's leader Lease (`humanwork-operator-<shard>`)."""
    return shards.lease(cluster.api, name)
