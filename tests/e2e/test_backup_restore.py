"""Backup and restore end to end (`python -m platform_api.backup`), on the process-mode
stack with the operator, the platform and a real agent process, on both databases the
platform runs on: PostgreSQL (production) and an SQLite file (the embedded default that
`make up` and the dev overlay run, on their volume).

A step is executing when the backup is taken (the fake Shopify applied the write and holds
its answer); it then finishes, the audit log moves on and a checkpoint is signed. The
platform's database and the task are then lost (the operator deleted the finished task,
as it does after its TTL), and the backup is restored: PostgreSQL into a new database,
SQLite over the platform's own file once the platform is stopped (the documented
procedure), with the resources. The restore says it went back to an older point (exit 3,
in words, on `/healthz` and the metric); each chain still verifies against itself; the
task comes back with the step `OutcomeUnknown` (never run again by the agent of the
restored platform) and the queue's detail shows what the ledger knows; the expert marks
it executed and the upstream still counts one write.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from humanwork_dev.postgres import PostgresServer
from humanwork_dev.processes import AgentProcess, PlatformProcess
from tests.conftest import Cluster
from tests.e2e.conftest import World, execution_state, open_world, step_of
from tests.e2e.writes import MUG, approved_write
from tests.fixtures.stack import PROCESS_START_SECONDS, server_env

HOLD_SECONDS = 9.0  # under the proxy's 10 s timeout: the held write then succeeds


@dataclass
class Store:
    """The platform the test backs up, and its database."""

    kind: str  # `postgresql` or `sqlite`
    platform: PlatformProcess
    postgres: PostgresServer | None = None


@pytest.fixture(params=["postgresql", "sqlite"])
def store(request: pytest.FixtureRequest, cluster: Cluster, tmp_path: Path) -> Iterator[Store]:
    """The suite's platform on PostgreSQL, or a platform of this test's own on an SQLite
    file (started like the suite's, the operator running)."""
    if request.param == "postgresql":
        platform = request.getfixturevalue("platform_server")
        yield Store("postgresql", platform, request.getfixturevalue("postgres"))
        return
    request.getfixturevalue("operator")
    workdir = tmp_path / "sqlite-platform"
    workdir.mkdir()
    endpoints = workdir / "agent-endpoints.json"
    endpoints.write_text("{}")
    url = f"sqlite+aiosqlite:///{workdir / 'platform.db'}"
    platform = PlatformProcess(
        cluster.kubeconfig,
        cluster.kubectl_path,
        workdir,
        env=server_env(url, endpoints),
        module="tests.fixtures.platform_main",
    )
    try:
        platform.start(timeout=PROCESS_START_SECONDS)  # it migrates the new file first
        yield Store("sqlite", platform)
    finally:
        platform.stop()
        print(platform.tail(40))


def tool(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    print(args[:2], done.returncode, done.stdout, done.stderr)
    return done


async def until(read: Any, check: Any, within: float = 90) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        value = await read()
        if check(value):
            return value
        if loop.time() > deadline:
            raise AssertionError(f"not within {within}s: {str(value)[:2000]}")
        await asyncio.sleep(0.2)


async def in_process(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`python -m platform_api.backup ARGS` in this process (a new interpreter takes tens of
    seconds to import on a loaded machine, longer than the step stays executing)."""
    import contextlib
    import io

    from platform_api.backup.cli import main

    def run() -> subprocess.CompletedProcess[str]:
        out, err = io.StringIO(), io.StringIO()
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(args)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        print(args[:1], code, out.getvalue(), err.getvalue())
        return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())

    return await asyncio.to_thread(run)


def checkpoint_env(tmp: Path) -> dict[str, str]:
    key = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    (tmp / "checkpoint-key.pem").write_bytes(key)
    return {
        "HUMANWORK_AUDIT_CHECKPOINT_DIR": str(tmp / "checkpoints"),
        "HUMANWORK_AUDIT_CHECKPOINT_KEY_FILE": str(tmp / "checkpoint-key.pem"),
    }


async def restored_platform(world: World, url: str, tmp: Path) -> PlatformProcess:
    endpoints = tmp / "restored" / "agent-endpoints.json"
    endpoints.parent.mkdir(parents=True, exist_ok=True)
    endpoints.write_text("{}")
    platform = PlatformProcess(
        world.cluster.kubeconfig,
        world.cluster.kubectl_path,
        tmp / "restored",
        env={
            **world.platform.env,
            "HUMANWORK_DATABASE_URL": url,
            "HUMANWORK_AGENT_ENDPOINTS_FILE": str(endpoints),
        },
    )
    platform.start(timeout=300)  # a loaded machine takes its time to import and migrate
    return platform


async def test_a_restore_to_an_older_point_says_so_and_runs_nothing_twice(
    store: Store, cluster: Cluster, tmp_path: Path
) -> None:
    env = checkpoint_env(tmp_path)
    if store.postgres is not None:
        env["HUMANWORK_PG_BIN"] = str(store.postgres.bin_dir)
    async with open_world(cluster, store.platform, tmp_path) as world:
        before = world.shop.inventory(MUG)
        assert before is not None
        name, backup = await backup_while_executing(world, store, env, tmp_path)
        url = await lose_everything_after(world, store, name, env)
        restored = await in_process(
            ["restore", "--from", str(backup), "--database-url", url,
             "--kubeconfig", world.cluster.kubeconfig],
            env,
        )  # fmt: skip
        assert restored.returncode == 3, restored.stderr  # restored, to an older point
        assert "RESTORED TO AN OLDER POINT" in restored.stdout
        assert f"org:{world.org_id}" in restored.stdout or world.org_id in restored.stdout
        assert "every chain verifies against itself" in restored.stdout
        assert f"{world.namespace}/{name}: fix came back as outcome unknown" in restored.stdout
        # every chain verifies against itself (no checkpoint settings: the chains alone)
        verified = tool(["platform_api.audit", "verify", "--database-url", url], {})
        assert verified.returncode == 0 and "every chain intact" in verified.stdout
        # against the checkpoints the cut is named, which is the truth
        behind = tool(["platform_api.audit", "verify", "--database-url", url], env)
        assert behind.returncode == 1 and "truncated" in behind.stderr

        platform = await restored_platform(world, url, tmp_path)
        agent = AgentProcess(
            world.cluster.kubeconfig, world.namespace, "agent", tmp_path / "agent2", platform.url
        )
        try:
            await check_restored(world, platform, agent, name, before)
        finally:
            agent.stop()
            platform.stop()
            print(platform.tail(40))


async def backup_while_executing(
    world: World, store: Store, env: dict[str, str], tmp: Path
) -> tuple[str, Path]:
    """An approved write whose answer the upstream holds (the step executing), backed up
    while the platform serves; the task's name and the backup's folder."""
    url = world.platform.env["HUMANWORK_DATABASE_URL"]
    world.shop.misbehave_after_write("late", seconds=HOLD_SECONDS)
    name = await approved_write(world)
    # the write reached Shopify and its answer is held: the step is executing
    await world.until(
        name,
        lambda t: execution_state(t, "fix") == "Running" and len(world.shop.side_effects) == 1,
    )
    backup = tmp / "backup"
    made = await in_process(
        ["backup", "--out", str(backup), "--database-url", url,
         "--kubeconfig", world.cluster.kubeconfig],
        env,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    manifest = json.loads((backup / "manifest.json").read_text())
    copy = backup / ("database.dump" if store.kind == "postgresql" else "database.sqlite")
    assert manifest["database"] == store.kind and copy.stat().st_size
    saved = json.loads((backup / "resources.json").read_text())["agentictasks"]
    mine = next(t for t in saved if t["metadata"]["name"] == name)
    assert step_of(mine, "fix")["execution"]["state"] == "Running"
    return name, backup


async def lose_everything_after(world: World, store: Store, name: str, env: dict[str, str]) -> str:
    """After the backup: the step finishes, the audit log moves on, a checkpoint is signed;
    then the disaster (the agent stops, the task is gone). The database URL to restore
    into: a new PostgreSQL database, or the platform's own SQLite file once it is stopped."""
    url = world.platform.env["HUMANWORK_DATABASE_URL"]
    world.shop.behave()
    await world.until(
        name,
        # Succeeded; or, on a machine so loaded that the held answer came after the proxy's
        # timeout, OutcomeUnknown: the step is past the backup either way
        lambda t: execution_state(t, "fix") in ("Succeeded", "OutcomeUnknown"),
        within=90,
    )
    # a decision after the backup, so that the org's chain surely moves past it
    other = await approved_write(world, decide=False)
    rejected = await world.decide(other, "fix", "reject", feedback="not this one")
    assert rejected.status_code == 200, rejected.text
    signed = tool(["platform_api.audit", "checkpoint", "--database-url", url], env)
    assert signed.returncode == 0, signed.stderr
    assert len(world.shop.side_effects) == 1

    # the disaster: the agent stops, the task is gone (deleted after its TTL, or by hand)
    world.agent.stop()
    world.cluster.kubectl(
        "delete", "agentictask", name, "-n", world.namespace, "--ignore-not-found", "--wait=true"
    )
    if store.postgres is not None:
        return await store.postgres.create_database(f"restored_{uuid.uuid4().hex[:10]}")
    world.platform.stop()  # `kubectl scale --replicas=0`: nothing writes the file meanwhile
    return url


async def check_restored(
    world: World, platform: PlatformProcess, agent: AgentProcess, name: str, before: int
) -> None:
    http: httpx.AsyncClient = world.http
    health = (await http.get(f"{platform.url}/healthz")).json()
    assert health["restore"]["behind"] is True, health
    assert health["restore"]["chains_behind"], health
    agent.start(timeout=300)
    endpoints = platform.workdir / "agent-endpoints.json"
    endpoints.write_text(json.dumps({f"{world.namespace}/agent": agent.url}))
    item = f"{world.namespace}/{name}/fix"

    async def detail() -> dict[str, Any]:
        r = await http.get(f"{platform.url}/human-tasks/{item}", headers=world.expert)
        assert r.status_code == 200, r.text
        body: dict[str, Any] = r.json()
        return body

    shown = await until(detail, lambda d: d["status"] == "outcome_unknown")
    known = shown["unknown_outcome"]
    assert known["integration"] == "shopify" and known["operation"] == "adjustInventoryLevel"
    # the ledger's claim moved to the re-created task: it was started (or done) at backup
    assert known["ledger"] in ("unknown", "done"), known
    task = (
        await http.get(
            f"{platform.url}/agentic/tasks/{world.namespace}/{name}", headers=world.expert
        )
    ).json()
    assert "restored from a backup" in step_of(task, "fix")["execution"]["error"]
    assert len(world.shop.side_effects) == 1  # the agent did not run it again
    r = await http.post(
        f"{platform.url}/human-tasks/{item}/resolve",
        json={"outcome": "applied", "note": "the admin shows the write"},
        headers=world.expert,
    )
    assert r.status_code == 200, r.text

    async def read() -> dict[str, Any]:
        got = await http.get(
            f"{platform.url}/agentic/tasks/{world.namespace}/{name}", headers=world.expert
        )
        return dict(got.json()) if got.status_code == 200 else {"status": {"phase": "gone"}}

    await until(read, lambda t: (t.get("status") or {}).get("phase") in ("Completed", "gone"))
    assert len(world.shop.side_effects) == 1
    assert len(world.shop.requests_to("inventory_levels/adjust.json")) == 1
    assert world.shop.inventory(MUG) == before - 3


def test_the_restored_status_makes_every_unfinished_approved_step_unknown() -> None:
    """The rule alone (no cluster): finished runs, undecided and rejected steps and input
    steps are kept; an approved tool step running, not started, or resolved and maybe run
    again after the backup comes back `OutcomeUnknown`."""
    from datetime import UTC, datetime

    from platform_api.backup.resources import RESTORED_NOTE, reconcile_status

    def step(sid: str, kind: str = "action") -> dict[str, Any]:
        return {"id": sid, "kind": kind, "tool": "shopify" if kind == "action" else None}

    approve = {"verdict": "approve", "by": "e"}
    entries = [
        {"id": "done", "decision": approve, "execution": {"state": "Succeeded", "attempt": 1}},
        {"id": "running", "decision": approve, "execution": {"state": "Running", "attempt": 2}},
        {"id": "approved", "decision": approve},
        {"id": "undecided"},
        {"id": "rejected", "decision": {"verdict": "reject", "by": "e"}},
        {"id": "input", "decision": {"verdict": "provide", "by": "e"}},
        {
            "id": "waiting",
            "decision": approve,
            "execution": {"state": "OutcomeUnknown", "attempt": 1},
        },
        {
            "id": "resolved",
            "decision": approve,
            "execution": {"state": "OutcomeUnknown", "attempt": 1},
            "resolution": {"outcome": "not_applied", "attempt": 1},
        },
    ]
    task = {
        "spec": {
            "steps": [step(e["id"], "input" if e["id"] == "input" else "action") for e in entries]
        },
        "status": {"phase": "InProgress", "steps": entries},
    }
    status, unknown = reconcile_status(task, datetime(2026, 12, 1, tzinfo=UTC))
    assert unknown == ["running", "approved", "resolved"]
    by_id = {e["id"]: e for e in status["steps"]}
    assert by_id["running"]["execution"]["attempt"] == 2
    assert by_id["approved"]["execution"]["attempt"] == 1
    assert by_id["resolved"]["execution"]["attempt"] == 2  # the resolution no longer applies
    assert all(by_id[s]["execution"]["error"] == RESTORED_NOTE for s in unknown)
    assert by_id["done"]["execution"]["state"] == "Succeeded"
    assert "execution" not in by_id["undecided"] and "execution" not in by_id["rejected"]
    assert "execution" not in by_id["input"]
    assert task["status"]["steps"][1]["execution"]["state"] == "Running"  # input untouched
