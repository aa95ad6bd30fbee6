"""Run the project's components as local processes against a cluster, each under its own
ServiceAccount's token (for the integration tests, the benchmarks and `make up`)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import ClassVar

import httpx

from humanwork_dev import cluster as local

PLATFORM_NS = "humanwork-system"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Process:
    """What every component process shares: its log, stopping, killing, memory."""

    log: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def kill(self) -> None:
        """SIGKILL: no chance to finish anything (a crash, an OOM kill)."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()

    def rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def tail(self, lines: int = 40) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


class OperatorProcess(_Process):
    """The operator run as `python -m agent_operator` with the humanwork-operator
    ServiceAccount's token (so its RBAC is what the tests exercise)."""

    started: ClassVar[list[OperatorProcess]] = []
    """Every instance started in this process, for tests that must pause them all."""

    @classmethod
    def running(cls) -> list[OperatorProcess]:
        return [p for p in cls.started if p.proc is not None and p.proc.poll() is None]

    def __init__(
        self,
        admin_kubeconfig: str,
        kubectl: str,
        workdir: Path,
        env: dict[str, str] | None = None,
    ) -> None:
        self.workdir = workdir
        self.extra_env = env or {}
        workdir.mkdir(parents=True, exist_ok=True)
        self.kubeconfig = local.token_kubeconfig(
            admin_kubeconfig,
            kubectl,
            PLATFORM_NS,
            "humanwork-operator",
            workdir / "operator.kubeconfig",
        )
        self.log = workdir / "operator.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.health_port = 0
        self.metrics_port = 0

    def start(self, timeout: float = 60.0) -> None:
        self.health_port, self.metrics_port = free_port(), free_port()
        env = {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "HUMANWORK_OPERATOR_METRICS_PORT": str(self.metrics_port),
            "HUMANWORK_OPERATOR_METRICS_ADDRESS": "127.0.0.1",
            **self.extra_env,
        }
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agent_operator",
                "--liveness",
                f"http://127.0.0.1:{self.health_port}/healthz",
            ],
            env=env,
            stdout=self.log.open("ab"),
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.workdir,
        )
        if self not in OperatorProcess.started:
            OperatorProcess.started.append(self)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"the operator exited with {self.proc.returncode}:\n{self.tail()}"
                )
            try:
                url = f"http://127.0.0.1:{self.health_port}/healthz"
                if httpx.get(url, timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"the operator was not healthy within {timeout}s:\n{self.tail()}")

    def metrics(self) -> str:
        return httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).text

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the samples of `name` whose labels include `labels`."""
        total = 0.0
        for line in self.metrics().splitlines():
            if not line.startswith(name) or line.startswith("#"):
                continue
            head, _, value = line.rpartition(" ")
            if head.split("{")[0] != name:
                continue
            if all(f'{k}="{v}"' in head for k, v in labels.items()):
                total += float(value)
        return total


def _wait_healthy(proc: subprocess.Popen[bytes], url: str, timeout: float, tail: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: the process exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} was not healthy within {timeout}s; log: {tail}")


class PlatformProcess(_Process):
    """The platform API run as `python -m platform_api.main serve` with the
    humanwork-platform-api ServiceAccount's token, a real HTTP port and the given settings
    (environment variables `HUMANWORK_*`), so that agent processes can reach it."""

    def __init__(
        self,
        admin_kubeconfig: str,
        kubectl: str,
        workdir: Path,
        env: dict[str, str],
        module: str = "platform_api.main",
    ) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.workdir = workdir
        self.module = module
        """The module run with `-m` (the tests name a wrapper of `platform_api.main`)."""
        self.kubeconfig = local.token_kubeconfig(
            admin_kubeconfig,
            kubectl,
            PLATFORM_NS,
            "humanwork-platform-api",
            workdir / "platform.kubeconfig",
        )
        self.env = env
        self.log = workdir / "platform.log"
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(
        self, timeout: float = 60.0, *, port: int = 0, env: dict[str, str] | None = None
    ) -> None:
        """Start on `port` (a free one by default: pass the old one to restart in place),
        with `env` added to the settings for this run only."""
        self.port = port or free_port()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", self.module, "serve", "--port", str(self.port)],
            env={
                **os.environ,
                "HUMANWORK_KUBECONFIG": str(self.kubeconfig),
                "HUMANWORK_HOST": "127.0.0.1",
                **self.env,
                **(env or {}),
            },
            stdout=self.log.open("ab"),
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.workdir,
        )
        _wait_healthy(self.proc, f"{self.url}/healthz", timeout, self.log.name)


class AgentProcess(_Process):
    """An AgentInstance's agent run locally with exactly what its pod spec gives it (see
    `humanwork_dev.runagent`); it keeps its state folder across `kill` and `start`, as a
    container restart keeps the pod's emptyDir."""

    def __init__(
        self, admin_kubeconfig: str, namespace: str, name: str, workdir: Path, platform_url: str
    ) -> None:
        from kubernetes import config

        from humanwork_dev import runagent

        workdir.mkdir(parents=True, exist_ok=True)
        self.workdir = workdir
        self.log = workdir / "agent.log"
        api = config.new_client_from_config(config_file=admin_kubeconfig)  # type: ignore[no-untyped-call]
        self.spec = runagent.materialise(
            api, namespace, name, workdir / "pod", platform_url=platform_url
        )
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.spec.port}"

    @property
    def metrics_url(self) -> str:
        """The agent's `/metrics` (on its own port; only when its pod spec serves them)."""
        if not self.spec.metrics_port:
            raise RuntimeError("this agent's pod spec serves no metrics")
        return f"http://127.0.0.1:{self.spec.metrics_port}/metrics"

    def start(self, timeout: float = 60.0) -> None:
        from humanwork_dev import runagent

        self.proc = runagent.start(self.spec, self.log)
        _wait_healthy(self.proc, f"{self.url}/v1/health", timeout, self.tail())
