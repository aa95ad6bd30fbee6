"""The platform's Prometheus metrics (issue 17, item 4), read from their own port as
Prometheus would: requests by route template and code, decisions by verdict, the open
decisions and the nearest deadline of the queue."""

from __future__ import annotations

import asyncio
import math
import time
from pathlib import Path

import httpx
import pytest

from humanwork_dev.cluster import free_port
from platform_api.settings import Settings
from tests.platform.conftest import make_settings
from tests.platform_k8s.conftest import Orgs, TaskApi, until

STEP = {"id": "only", "description": "Refund order 17", "tool": "shopify_refund", "risk": "high"}
PORT = free_port()


@pytest.fixture
def settings(database_url: str, platform_kubeconfig: Path) -> Settings:
    return make_settings(database_url, kubeconfig=str(platform_kubeconfig), metrics_port=PORT)


def scrape() -> dict[str, float]:
    """The samples, by their full name with labels."""
    text = httpx.get(f"http://127.0.0.1:{PORT}/metrics", timeout=10).text
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples


NEAREST = "humanwork_platform_nearest_deadline_timestamp_seconds"
OPEN = "humanwork_platform_open_decisions"


async def settled(name: str, quiet: float = 5.0, within: float = 120.0) -> float:
    """The cluster-wide gauge `name` once other tests' leftovers stopped moving it (their
    namespaces, and the tasks in them, go some time after those tests end): the same value
    over `quiet` seconds, or whatever it is after `within`."""
    deadline = time.monotonic() + within
    value = (await asyncio.to_thread(scrape))[name]
    while time.monotonic() < deadline:
        await asyncio.sleep(quiet)
        now = (await asyncio.to_thread(scrape))[name]
        if now == value:
            return now
        value = now
    return value


async def test_requests_decisions_and_the_queue_are_measured(
    tasks: TaskApi, orgs: Orgs, client: httpx.AsyncClient
) -> None:
    # the queue gauges cover the whole cluster, where other tests may have left tasks
    await until(
        lambda: client.get("/human-tasks", headers=orgs.viewer.headers),
        lambda r: r.status_code == 200,
    )
    baseline = await settled(OPEN)
    created = await tasks.create(
        orgs.requester, orgs.org_a, steps=[STEP], policy={"decisionDeadlineSeconds": 600}
    )
    await until(
        lambda: client.get("/human-tasks", headers=orgs.viewer.headers),
        lambda r: r.json()["total"] == 1,
    )
    samples = await until(
        lambda: asyncio.to_thread(scrape),
        # the deadline comes with the operator's first tick, maybe after the task is listed
        # (and other tests' tasks may hold later deadlines): wait for one within 600 s
        lambda s: s[OPEN] == baseline + 1 and s.get(NEAREST, math.inf) <= time.time() + 600,
    )
    nearest, with_ours = samples[NEAREST], samples[OPEN]
    assert nearest <= time.time() + 600
    # the route template, never the raw path with its ids
    key = 'humanwork_platform_requests_total{code="200",method="GET",route="/human-tasks"}'
    assert samples[key] >= 1
    assert not [k for k in samples if created["id"] in k]
    r = await client.get("/orgs/00000000-0000-0000-0000-000000000000", headers=orgs.viewer.headers)
    assert r.status_code == 404
    missing = 'humanwork_platform_requests_total{code="404",method="GET",route="/orgs/{org_id}"}'
    assert scrape()[missing] == 1

    r = await tasks.decide(orgs.expert, created["id"], "only")
    assert r.status_code == 200, r.text
    samples = scrape()
    assert samples['humanwork_platform_decisions_total{verdict="approve"}'] == 1
    latency = 'humanwork_platform_request_duration_seconds_count{method="POST",route='
    assert any(k.startswith(latency) and "/approve" in k for k in samples)
    await until(
        lambda: client.get("/human-tasks", headers=orgs.viewer.headers),
        lambda r: r.json()["total"] == 0,
    )
    await until(
        lambda: asyncio.to_thread(scrape),
        lambda s: s[OPEN] <= with_ours - 1,
    )
