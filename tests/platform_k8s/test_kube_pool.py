"""The connection pools to a real kube-apiserver give back what a burst took.

The platform's `KubeClient` (under its ServiceAccount) and the operator's `Kube` each make
a burst of concurrent calls, then a steady trickle of sequential ones. The pool must have
opened one TLS connection per call in flight, and then, under the trickle, close the
surplus once it has idled past the keep-alive (aiohttp's 15 s): a pool reused first in,
first out keeps every connection busy within its keep-alive and never closes one (the
platform's memory then stays at its most-ever in flight, ~300 KiB a connection).

The connections are counted by the kernel (this process's established sockets to the API
server's port opened after the client was made), not by the pool's own books.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from agent_operator.kube import Kube
from humanwork_dev.processes import PLATFORM_NS
from platform_api.kube.client import KubeClient
from platform_api.settings import Settings
from tests.conftest import Cluster

BURST = 16
"""Calls in flight at once; the trickle below reuses all of them within the keep-alive
(16 x ~0.2 s < 15 s) if the pool reuses first in, first out."""
TRICKLE_PAUSE = 0.1
SETTLED = 3
"""At most this many connections once the surplus has idled out (the trickle needs one)."""
BOUND = 120.0
"""Generous: the keep-alive is 15 s and the connector's cleanup runs every 15 s."""


def _api_port(kubeconfig: Path) -> int:
    server = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    parts = urlsplit(server)
    return parts.port or 443


def _established_to(port: int) -> set[int]:
    """Local ports of this process's established TCP connections to `port` (IPv4 and 6),
    from /proc: the socket inodes of our fds matched with the kernel's tables."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found: set[int] = set()
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        with open(table) as lines:
            next(lines)
            for line in lines:
                fields = line.split()
                local, remote, state, inode = fields[1], fields[2], fields[3], fields[9]
                if state == "01" and inode in inodes and int(remote.rsplit(":")[1], 16) == port:
                    found.add(int(local.rsplit(":")[1], 16))
    return found


@dataclass
class Client:
    call: Callable[[], Awaitable[object]]
    close: Callable[[], Awaitable[None]]


async def _platform(platform_kubeconfig: Path, admin_kubeconfig: str) -> Client:
    kube = await KubeClient.from_settings(Settings(kubeconfig=str(platform_kubeconfig)))
    assert kube is not None
    return Client(lambda: kube.namespace_labels(PLATFORM_NS), kube.close)


async def _operator(platform_kubeconfig: Path, admin_kubeconfig: str) -> Client:
    kube = await Kube.connect(admin_kubeconfig)
    return Client(lambda: kube.get("v1", "Namespace", None, PLATFORM_NS), kube.close)


@pytest.mark.parametrize("make", [_platform, _operator], ids=["platform", "operator"])
async def test_the_pool_shrinks_back_after_a_burst_under_a_steady_trickle(
    make: Callable[[Path, str], Awaitable[Client]],
    platform_kubeconfig: Path,
    cluster: Cluster,
) -> None:
    port = _api_port(platform_kubeconfig)
    before = _established_to(port)
    kube = await make(platform_kubeconfig, cluster.kubeconfig)

    def ours() -> int:
        return len(_established_to(port) - before)

    try:
        # the burst: one connection per call in flight (a positive control of the count)
        started = asyncio.Event()

        async def one() -> None:
            await started.wait()
            await kube.call()

        calls = [asyncio.create_task(one()) for _ in range(BURST)]
        started.set()
        await asyncio.gather(*calls)
        after_burst = ours()
        assert after_burst >= BURST * 3 // 4, f"the burst opened {after_burst} connections"

        # the trickle: sequential calls, each pooled connection free to be reused; poll
        seen = [after_burst]
        deadline = time.monotonic() + BOUND
        while seen[-1] > SETTLED and time.monotonic() < deadline:
            await kube.call()
            await asyncio.sleep(TRICKLE_PAUSE)
            seen.append(ours())
        assert seen[-1] <= SETTLED, (
            f"after {BOUND:.0f}s of a steady trickle the pool still holds {seen[-1]} "
            f"connections (from {after_burst} after the burst): none idled out"
        )
    finally:
        await kube.close()
