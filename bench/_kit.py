"""What the bench scripts set up the same way: the platform on a scratch control plane and
a throwaway PostgreSQL, py-spy on a process, the bench users' password and their login
(`login`, `login_async`, and the parts a bench that signs in its own way uses), the org
`bench` with its users (`bench_experts`: a requester and experts, signed in), and the
AgentInstance of a bench org.

Imported by the scripts beside it (each runs as `python bench/<script>.py`, which puts
this folder on the import path).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from humanwork_dev import cluster
from humanwork_dev.postgres import PostgresServer
from humanwork_dev.processes import PlatformProcess

REPO = Path(__file__).resolve().parents[1]
PASSWORD = "bench-password-0123456789"
"""The password of the platform's admin and of every user a bench makes."""
JWT_SECRET = "bench-jwt-secret-0123456789-0123456789"
GROUP, VERSION, INSTANCES = "humanwork.io", "v1alpha1", "agentinstances"


def bearer(token: str) -> dict[str, str]:
    """The headers that present `token`."""
    return {"Authorization": f"Bearer {token}"}


TOKEN_PATH = "/auth/token"
"""Where a user signs in (`POST`, with `credentials`)."""


def credentials(username: str, password: str = PASSWORD) -> dict[str, str]:
    """The body that signs `username` in (every bench user has PASSWORD, unless the bench
    gave it another)."""
    return {"username": username, "password": password}


def token_of(answer: httpx.Response) -> str:
    """The access token a `POST /auth/token` answered (raises on an error status)."""
    return str(answer.raise_for_status().json()["access_token"])


def login(http: httpx.Client, username: str, password: str = PASSWORD) -> dict[str, str]:
    """The bearer headers of `username`."""
    return bearer(token_of(http.post(TOKEN_PATH, json=credentials(username, password))))


async def login_async(
    http: httpx.AsyncClient, username: str, password: str = PASSWORD
) -> dict[str, str]:
    """The bearer headers of `username`, asked without blocking."""
    return bearer(token_of(await http.post(TOKEN_PATH, json=credentials(username, password))))


def bench_org(http: httpx.Client, users: list[tuple[str, str]]) -> str:
    """The org `bench` and its `users` (username, role), made as the platform's admin
    would; the org's id."""
    admin = login(http, "admin")
    org = http.post("/orgs", json={"slug": "bench", "name": "Bench"}, headers=admin)
    org.raise_for_status()
    org_id = str(org.json()["id"])
    for username, role in users:
        http.post(
            "/users",
            json={"username": username, "password": PASSWORD, "role": role, "org_ids": [org_id]},
            headers=admin,
        ).raise_for_status()
    return org_id


def bench_experts(
    http: httpx.Client, experts: int
) -> tuple[str, dict[str, str], list[dict[str, str]]]:
    """The org `bench` with a requester and `experts` experts (`expert0`, ...), each signed
    in: the org's id, the requester's headers and the experts'."""
    names = [f"expert{i}" for i in range(experts)]
    org_id = bench_org(http, [("requester", "operator")] + [(n, "expert") for n in names])
    return org_id, login(http, "requester"), [login(http, name) for name in names]


@dataclass(frozen=True)
class Scratch:
    """A scratch control plane, its state folder, a PostgreSQL and the platform serving."""

    state: Path
    info: cluster.ClusterInfo
    postgres: PostgresServer
    platform: PlatformProcess


@contextmanager
def scratch_platform(
    prefix: str, env: dict[str, str] | None = None, manifests: tuple[str, ...] = ()
) -> Iterator[Scratch]:
    """A scratch control plane (CRDs, admission policies and the platform's RBAC applied,
    and the kustomizations `manifests` names), a PostgreSQL with database `bench`, and the
    platform as a real server under its ServiceAccount (`env` added to its settings); all
    stopped and removed afterwards."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        state = Path(tmp)
        info = cluster.up(state / "cluster")
        postgres = PostgresServer()
        postgres.start()
        platform: PlatformProcess | None = None
        try:
            kubectl = [info.kubectl, "--kubeconfig", info.kubeconfig]
            for path in ("crds", "manifests/base/policies", "manifests/base/platform", *manifests):
                apply = [*kubectl, "apply", "-k", str(REPO / path)]
                subprocess.run(apply, check=True, capture_output=True)
            time.sleep(2)  # admission policies become active
            database_url = asyncio.run(postgres.create_database("bench"))
            platform = PlatformProcess(
                info.kubeconfig,
                info.kubectl,
                state / "platform",
                env={
                    "HUMANWORK_DATABASE_URL": database_url,
                    "HUMANWORK_ADMIN_PASSWORD": PASSWORD,
                    "HUMANWORK_JWT_SECRET": JWT_SECRET,
                    **(env or {}),
                },
            )
            platform.start()
            yield Scratch(state, info, postgres, platform)
        finally:
            if platform is not None:
                platform.stop()
            postgres.stop()
            cluster.down(state / "cluster")


def py_spy(out: str | None, pid: int) -> subprocess.Popen[bytes] | None:
    """py-spy recording process `pid` (collapsed stacks into `out`) until interrupted with
    SIGINT; None without `out`."""
    if not out:
        return None
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    proc = subprocess.Popen(
        [spy, "record", "--pid", str(pid), "--format", "raw", "--rate", "200", "-o", out],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1)
    return proc


def gc_hook_env(report: Path) -> dict[str, str]:
    """The environment that puts `bench/gc_hook` on a platform process, its totals in
    `report` (read them with `GcReport.read`)."""
    path = [str(REPO / "bench" / "gc_hook"), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {"PYTHONPATH": os.pathsep.join(path), "HUMANWORK_GC_FILE": str(report)}


@dataclass(frozen=True)
class GcReport:
    """What `bench/gc_hook` last reported: the CPU the garbage collector spent, its
    collections per generation and its thresholds."""

    seconds: float
    collections: tuple[int, int, int]
    threshold: tuple[int, int, int]

    @staticmethod
    def read(report: Path) -> GcReport:
        raw = json.loads(report.read_text())
        return GcReport(raw["seconds"], tuple(raw["collections"]), tuple(raw["threshold"]))


def agent_instance(ns: str, org_id: str) -> dict[str, Any]:
    """The AgentInstance `agent` of a bench org (its LLM key in Secret `llm`)."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "AgentInstance",
        "metadata": {"name": "agent", "namespace": ns},
        "spec": {
            "orgId": org_id,
            "specialist": {"name": "Bob", "systemPrompt": "You reconcile orders."},
            "model": "openai/gpt-4o",
            "llm": {
                "baseURL": "https://llm.example/v1",
                "apiKeySecretRef": {"name": "llm", "key": "api-key"},
            },
        },
    }
