"""The whole local stack for `make up`: the control plane, the humanwork resources, and the
operator and platform API running as background processes under their own identities.

    humanwork-stack up       # idempotent: starts what is not running yet
    humanwork-stack status
    humanwork-stack down     # stops the components and the control plane

The operator authenticates with its ServiceAccount's token (so its RBAC is what runs),
the platform API with the humanwork-platform-api ServiceAccount's and an SQLite database
in `.cluster/`. Logs go to `.cluster/logs/<component>.log`; the processes are recorded in
`.cluster/components.json`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import httpx

from humanwork_dev import cluster

OPERATOR_HEALTH = 8080
OPERATOR_METRICS = 9090
PLATFORM_PORT = 8000
MANIFESTS = (
    "crds",
    "manifests/base/policies",
    "manifests/base/operator",
    "manifests/base/platform",
)


def _components(state: Path) -> dict[str, int]:
    path = state / "components.json"
    if not path.exists():
        return {}
    with contextlib.suppress(ValueError):
        return {k: int(v) for k, v in json.loads(path.read_text()).items()}
    return {}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def _install(info: cluster.ClusterInfo) -> None:
    env = {**os.environ, "KUBECONFIG": info.kubeconfig}
    for path in MANIFESTS:
        subprocess.run(
            [info.kubectl, "apply", "-k", str(cluster.REPO / path)],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        if path == "crds":
            subprocess.run(
                [info.kubectl, "wait", "--for=condition=Established", "crd", "--all"],
                env=env,
                check=True,
                stdout=subprocess.DEVNULL,
            )


def _wait_http(name: str, url: str, pid: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            raise cluster.ClusterError(f"{name} exited; see .cluster/logs/{name}.log")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2).status_code == 200:
                return
        time.sleep(0.3)
    raise cluster.ClusterError(f"{name} did not answer {url} within {timeout:.0f}s")


def up(state: Path | None = None) -> dict[str, str]:
    """Start whatever of the stack is not running; return what the user needs to know."""
    state = state or cluster.state_dir_default()
    info = cluster.up(state)
    _install(info)
    running = {k: v for k, v in _components(state).items() if _alive(v)}
    logs = state / "logs"
    if "operator" not in running:
        kubeconfig = cluster.token_kubeconfig(
            info.kubeconfig,
            info.kubectl,
            "humanwork-system",
            "humanwork-operator",
            state / "operator.kubeconfig",
        )
        proc = cluster.spawn(
            "operator",
            [
                sys.executable,
                "-m",
                "agent_operator",
                "--liveness",
                f"http://127.0.0.1:{OPERATOR_HEALTH}/healthz",
            ],
            logs,
            env={
                "KUBECONFIG": str(kubeconfig),
                "HUMANWORK_OPERATOR_METRICS_PORT": str(OPERATOR_METRICS),
                "HUMANWORK_OPERATOR_METRICS_ADDRESS": "127.0.0.1",
            },
        )
        running["operator"] = proc.pid
        _wait_http("operator", f"http://127.0.0.1:{OPERATOR_HEALTH}/healthz", proc.pid)
    password_file = state / "admin-password"
    if not password_file.exists():
        password_file.write_text(
            os.environ.get("HUMANWORK_ADMIN_PASSWORD") or secrets.token_urlsafe(18)
        )
        password_file.chmod(0o600)
    if "platform" not in running:
        kubeconfig = cluster.token_kubeconfig(
            info.kubeconfig,
            info.kubectl,
            "humanwork-system",
            "humanwork-platform-api",
            state / "platform.kubeconfig",
        )
        proc = cluster.spawn(
            "platform",
            [sys.executable, "-m", "platform_api.main", "serve", "--port", str(PLATFORM_PORT)],
            logs,
            env={
                "HUMANWORK_KUBECONFIG": str(kubeconfig),
                "HUMANWORK_DATABASE_URL": f"sqlite+aiosqlite:///{state / 'platform.db'}",
                "HUMANWORK_ADMIN_PASSWORD": password_file.read_text().strip(),
            },
        )
        running["platform"] = proc.pid
        _wait_http("platform", f"http://127.0.0.1:{PLATFORM_PORT}/healthz", proc.pid)
    (state / "components.json").write_text(json.dumps(running, indent=2))
    return {
        "kubeconfig": info.kubeconfig,
        "bin_dir": info.bin_dir,
        "platform": f"http://127.0.0.1:{PLATFORM_PORT}",
        "admin_password_file": str(password_file),
    }


def down(state: Path | None = None) -> None:
    """Stop the components, then the control plane (which removes the state)."""
    state = state or cluster.state_dir_default()
    for pid in _components(state).values():
        cluster.stop_process(pid)
    cluster.down(state)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="humanwork-stack", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["up", "down", "status"])
    args = parser.parse_args(argv)
    state = cluster.state_dir_default()
    try:
        if args.command == "up":
            out = up(state)
            print(
                "humanwork is up: operator on the local control plane, platform API at "
                f"{out['platform']} (user admin, password in {out['admin_password_file']})",
                file=sys.stderr,
            )
            print(f"export KUBECONFIG={out['kubeconfig']}")
            print(f"export PATH={out['bin_dir']}:$PATH")
        elif args.command == "down":
            down(state)
            print("humanwork stack stopped", file=sys.stderr)
        else:
            info = cluster.status(state)
            comps = {k: _alive(v) for k, v in _components(state).items()}
            print(json.dumps({"cluster": info.server if info else None, "components": comps}))
            return 0 if info and comps and all(comps.values()) else 1
    except (cluster.ClusterError, subprocess.CalledProcessError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
