"""Restart one component of the local control plane (`humanwork_dev.cluster`) in place, for
the fault tests: kube-apiserver or etcd stopped and started again with exactly the command
line it runs with (read from `/proc`), on its port, state and certificates, and waited for
until it answers again. The new pid is recorded in `<state>/state.json`, so `status` and
`down` keep working.

    restart(state, "kube-apiserver", how="kill")   # SIGKILL, as a crash; "term" drains
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from humanwork_dev import cluster

HEALTH = {"kube-apiserver": "readyz", "etcd": "health"}
"""The components that can be restarted, and the path that says each answers again."""


def _cmdline(pid: int) -> list[str]:
    raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    return [part.decode() for part in raw.split(b"\0") if part]


def _answers(state: Path, component: str, args: list[str], server: str) -> bool:
    if component == "etcd":
        url = next(a.split("=", 1)[1] for a in args if a.startswith("--listen-client-urls="))
        return httpx.get(f"{url}/health", timeout=2).status_code == 200
    with cluster.admin_http(state) as c:
        return c.get(f"{server}/readyz").status_code == 200


def restart(
    state: Path,
    component: str,
    how: str = "kill",
    timeout: float = 180.0,
    while_down: Callable[[], None] | None = None,
) -> float:
    """Stop `component` (`kill`: SIGKILL, `term`: SIGTERM and wait), call `while_down`,
    and start it again with the same command line; the seconds until it answered again."""
    if component not in HEALTH:
        raise cluster.ClusterError(f"cannot restart {component}: one of {sorted(HEALTH)}")
    path = state / "state.json"
    info = json.loads(path.read_text())
    pid = int(info["pids"][component])
    args = _cmdline(pid)
    started = time.monotonic()
    if how == "kill":
        os.killpg(pid, signal.SIGKILL)
    cluster.stop_process(pid)
    if while_down is not None:
        while_down()
    proc = cluster.spawn(component, args, state / "logs")
    info["pids"][component] = proc.pid
    path.write_text(json.dumps(info, indent=2))
    cluster._wait(
        f"{component} to answer again",
        lambda: _answers(state, component, args, info["server"]),
        timeout,
        {component: proc},
    )
    return time.monotonic() - started
