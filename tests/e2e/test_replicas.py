"""Three platform replicas on one PostgreSQL and one control plane (issue 17, item 3).

The session's platform process and two more with the same settings serve the same
database; requests are spread across them the way a load balancer would. Decisions race
across replicas (exactly one wins), a replay with the same Idempotency-Key is answered
by another replica, the queue reads the same on each, failed sign-ins count on all of
them together, a revoked agent token is refused by each, and a replica killed in the
middle of a decision loses nothing: the caller retries on another one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from humanwork_dev.processes import PlatformProcess
from tests.conftest import Cluster
from tests.e2e.conftest import World, execution_state, step_of
from tests.fixtures.stack import PROCESS_START_SECONDS


@pytest.fixture(scope="module")
def extra_replicas(
    cluster: Cluster, platform_server: PlatformProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[PlatformProcess]]:
    """Two more replicas of the session's platform (same database, same settings, same
    command), shared by the module's tests: `replicas` starts them."""
    folder = tmp_path_factory.mktemp("replicas")
    extra = [
        PlatformProcess(
            cluster.kubeconfig,
            cluster.kubectl_path,
            folder / f"replica-{n}",
            platform_server.env,
            module=platform_server.module,
        )
        for n in (2, 3)
    ]
    try:
        yield extra
    finally:
        for proc in extra:
            proc.stop()


@pytest.fixture
def replicas(
    platform_server: PlatformProcess, extra_replicas: list[PlatformProcess]
) -> list[PlatformProcess]:
    """The session's platform and two more replicas of it, each running: one that is not
    (not started yet, or killed by an earlier test) is started again."""
    for proc in extra_replicas:
        if proc.proc is None or proc.proc.poll() is not None:
            proc.start(timeout=PROCESS_START_SECONDS)
    return [platform_server, *extra_replicas]


def approvals(task: dict[str, Any], step: str) -> list[dict[str, Any]]:
    return list(step_of(task, step).get("approvals") or [])


async def test_decisions_race_and_replay_across_replicas(
    world: World, replicas: list[PlatformProcess]
) -> None:
    http = world.http
    planned = await world.plan()
    name, read = planned["name"], planned["steps"][0]["id"]
    path = f"/agentic/tasks/{world.task_id(name)}/steps/{read}/approve"

    # the queue reads the same on every replica (each has its own watch cache)
    async def queue(proc: PlatformProcess) -> list[str]:
        r = await http.get(f"{proc.url}/human-tasks", headers=world.expert)
        assert r.status_code == 200, r.text
        return sorted(item["id"] for item in r.json()["items"])

    deadline = time.monotonic() + 20
    while True:
        seen = [await queue(proc) for proc in replicas]
        if all(s == seen[0] for s in seen) and any(name in i for i in seen[0]):
            break
        assert time.monotonic() < deadline, seen
        await asyncio.sleep(0.2)

    # two experts approve the same one-approval step at once on different replicas
    answers = await asyncio.gather(
        http.post(f"{replicas[1].url}{path}", json={}, headers=world.expert),
        http.post(f"{replicas[2].url}{path}", json={}, headers=world.expert2),
    )
    codes = sorted(r.status_code for r in answers)
    assert codes[0] == 200 and codes[1] == 409, [r.text for r in answers]
    task = await world.until(name, lambda t: execution_state(t, read) == "Succeeded")
    assert len(approvals(task, read)) == 1

    # the write step: approved once with a key, replayed on the two other replicas
    write = planned["steps"][1]["id"]
    write_path = f"/agentic/tasks/{world.task_id(name)}/steps/{write}/approve"
    headers = {**world.expert, "Idempotency-Key": "replica-replay-1"}
    first = await http.post(f"{replicas[0].url}{write_path}", json={}, headers=headers)
    assert first.status_code == 200, first.text
    for proc in replicas[1:]:
        again = await http.post(f"{proc.url}{write_path}", json={}, headers=headers)
        assert again.status_code == 200, again.text
        replay, original = again.json(), first.json()
        assert replay.pop("replayed") is True and original.pop("replayed") is False
        assert replay.pop("task")["id"] == original.pop("task")["id"]
        assert replay == original
    task = await world.task(name)
    assert len(approvals(task, write)) == 1
    rows = [r for r in await world.audit("task.step.approve") if name in r["target"]]
    assert len(rows) == 2, rows  # one per step, none for the replays


async def test_failed_sign_ins_count_on_every_replica_together(
    replicas: list[PlatformProcess],
) -> None:
    limit = 5  # HUMANWORK_LOGIN_MAX_FAILURES's default (the username from one address)
    username = f"nobody-{time.monotonic_ns()}"
    async with httpx.AsyncClient(timeout=30) as http:
        for n in range(limit):
            proc = replicas[n % len(replicas)]
            r = await http.post(
                f"{proc.url}/auth/token", json={"username": username, "password": f"guess-{n}"}
            )
            assert r.status_code == 401, r.text
        for proc in replicas:
            r = await http.post(
                f"{proc.url}/auth/token", json={"username": username, "password": "one more"}
            )
            assert r.status_code == 429, r.text
            assert r.json()["details"]["scope"] == "pair"


async def test_a_replica_killed_mid_decision_loses_nothing(
    world: World, replicas: list[PlatformProcess]
) -> None:
    http = world.http
    planned = await world.plan()
    name, read = planned["name"], planned["steps"][0]["id"]
    path = f"/agentic/tasks/{world.task_id(name)}/steps/{read}/approve"
    headers = {**world.expert, "Idempotency-Key": "killed-mid-request"}
    victim = replicas[1]

    async def approve_on_victim() -> httpx.Response | None:
        try:
            return await http.post(f"{victim.url}{path}", json={}, headers=headers)
        except httpx.HTTPError:
            return None

    request = asyncio.create_task(approve_on_victim())
    await asyncio.sleep(0.02)
    victim.kill()
    await request
    # the caller does not know whether it landed: it retries on another replica
    retried = await http.post(f"{replicas[2].url}{path}", json={}, headers=headers)
    assert retried.status_code == 200, retried.text
    task = await world.until(name, lambda t: execution_state(t, read) == "Succeeded")
    assert len(approvals(task, read)) == 1
    assert world.amazon.requests_to("/orders/v0/orders")
    rows = [r for r in await world.audit("task.step.approve") if name in r["target"]]
    assert len(rows) == 1, rows

    # a revoked agent token is refused by every replica still running
    r = await http.post(
        f"{replicas[0].url}/orgs/{world.org_id}/agents/agent/token/revoke", headers=world.admin
    )
    assert r.status_code == 202, r.text
    bearer = {"Authorization": f"Bearer {world.token}"}
    for proc in (replicas[0], replicas[2]):
        deadline = time.monotonic() + 15
        while True:
            r = await http.get(f"{proc.url}/v1/agent-api/whoami", headers=bearer)
            if r.status_code == 401:
                assert r.json()["details"]["reason"] == "token_revoked", r.text
                break
            assert time.monotonic() < deadline, (proc.url, r.status_code, r.text)
            await asyncio.sleep(0.2)
