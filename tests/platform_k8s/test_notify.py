"""Notifications (issue 14, item 3) on the real control plane and PostgreSQL: an org's
webhook receives every event of its tasks once, signed, retried after a failure; the URL
passes the upstreams' egress checks; the live event stream carries only the caller's
orgs' events and resumes from `Last-Event-ID`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from sqlalchemy import select

from humanwork_core import signing
from humanwork_dev.processes import free_port
from platform_api.app import create_app
from platform_api.db import SESSIONS
from platform_api.models import Message
from platform_api.settings import Settings
from tests.browser.support import record_execution as write_execution
from tests.conftest import Cluster
from tests.notify_support import Receiver, parse_sse
from tests.platform.conftest import Caller, make_settings
from tests.platform_k8s.conftest import Orgs, Shared, TaskApi, until

ONE_STEP = [
    {"id": "only", "description": "Refund order 17", "tool": "shopify_refund", "risk": "high"}
]


@pytest.fixture
def settings(database_url: str, platform_kubeconfig: Any) -> Settings:
    return make_settings(
        database_url,
        kubeconfig=str(platform_kubeconfig),
        upstream_allowed_endpoints=["127.0.0.1/32"],
        webhook_backoff_seconds=0.3,
        notify_interval_seconds=0.3,
        events_heartbeat_seconds=0.5,
    )


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver(fail_first=1).start()
    yield found
    found.stop()


def record_execution(cluster: Cluster, task_id: str, step_id: str, state: str) -> None:
    """A finished execution in the step's status, as its agent would write it."""
    error = "the shop answered 500" if state == "Failed" else None
    write_execution(cluster, task_id, step_id, None, state, error)


async def put_hook(
    client: httpx.AsyncClient, caller: Caller, org: str, **body: Any
) -> httpx.Response:
    return await client.put(f"/orgs/{org}/webhooks", json=body, headers=caller.headers)


@pytest.fixture
async def second_replica(settings: Settings, app: FastAPI, resolver: Any) -> AsyncIterator[FastAPI]:
    """Another replica of the platform on the same database and cluster: its own watch,
    notifier and deliverer."""
    other = create_app(settings, resolver=resolver)
    async with other.router.lifespan_context(other):
        yield other


async def test_the_webhook_receives_every_event_once_signed_and_retried(
    client: httpx.AsyncClient,
    app: FastAPI,
    second_replica: FastAPI,
    tasks: TaskApi,
    orgs: Orgs,
    cluster: Cluster,
    receiver: Receiver,
) -> None:
    # two replicas watch the same tasks and deliver from the same table: still once each
    r = await put_hook(client, orgs.admin_a, orgs.org_a, url=receiver.url)
    assert r.status_code == 200, r.text
    secret = r.json()["secret"]
    assert len(secret) == 64
    shown = await client.get(f"/orgs/{orgs.org_a}/webhooks", headers=orgs.admin_a.headers)
    assert shown.status_code == 200 and "secret" not in shown.json()
    assert secret not in shown.text

    conversation = str(uuid.uuid4())
    r = await client.post(
        f"/orgs/{orgs.org_a}/conversations",
        json={"id": conversation, "subject": "October orders"},
        headers=orgs.admin_a.headers,
    )
    assert r.status_code == 201, r.text

    # a two-step plan near its deadline: approved, then rejected at its second step
    plan = await tasks.create(
        orgs.requester,
        orgs.org_a,
        conversationId=conversation,
        policy={"decisionDeadlineSeconds": 300},
    )
    await tasks.until(orgs.expert, plan["id"], lambda t: bool(t["status"].get("steps")))
    assert (await tasks.decide(orgs.expert, plan["id"], "read")).status_code == 200
    record_execution(cluster, plan["id"], "read", "Succeeded")
    r = await tasks.decide(orgs.expert, plan["id"], "write", "reject", {"feedback": "only 10 SKUs"})
    assert r.status_code == 200, r.text
    # a step that fails, a step that completes, a decision that escalates then expires
    failing = await tasks.create(orgs.requester, orgs.org_a, steps=ONE_STEP)
    done = await tasks.create(orgs.requester, orgs.org_a, steps=ONE_STEP)
    for made in (failing, done):
        assert (await tasks.decide(orgs.expert, made["id"], "only")).status_code == 200
    record_execution(cluster, failing["id"], "only", "Failed")
    record_execution(cluster, done["id"], "only", "Succeeded")
    late = await tasks.create(
        orgs.requester,
        orgs.org_a,
        steps=ONE_STEP,
        policy={
            "decisionDeadlineSeconds": 2,
            "escalation": {"intervalSeconds": 2, "maxEscalations": 1},
        },
    )

    def ids(task: dict[str, Any], event: str) -> bool:
        return any(
            e["event"] == event and e["data"]["task_id"] == task["id"] for e in receiver.accepted()
        )

    wanted = [
        (plan, "decision_needed"),
        (plan, "near_deadline"),
        (plan, "rejected"),
        (failing, "step_failed"),
        (failing, "failed"),
        (done, "completed"),
        (late, "escalated"),
        (late, "expired"),
    ]

    async def missing() -> list[tuple[str, str]]:
        return [(t["id"], e) for t, e in wanted if not ids(t, e)]

    await until(missing, lambda m: not m, within=60)
    await asyncio.sleep(1.5)  # any duplicate would have been sent by now

    everything = receiver.snapshot()
    assert everything[0].status == 500  # the first delivery failed once ...
    first_id = everything[0].event["id"]
    taken = [r.event["id"] for r in everything if r.status < 300]
    assert first_id in taken  # ... and was delivered again
    assert len(taken) == len(set(taken)), "an event was delivered twice"
    now = datetime.now(UTC)
    for got in everything:
        signing.verify(secret, got.headers.get(signing.SIGNATURE_HEADER), got.body, now)
        assert got.headers["X-Humanwork-Event"] == got.event["event"]
        assert got.headers["Idempotency-Key"] == got.event["id"]
        assert got.event["org_id"] == orgs.org_a
    assert not any(e["event"] == "decided" for e in receiver.accepted())  # not asked for

    r = await client.get(f"/orgs/{orgs.org_a}/webhooks/deliveries", headers=orgs.admin_a.headers)
    assert r.status_code == 200, r.text
    retried = next(d for d in r.json()["items"] if d["event_id"] == first_id)
    assert retried["state"] == "delivered"
    assert [a["status"] for a in retried["attempts"]] == [500, 204]
    assert r.json()["total"] == len(taken)

    # the client's conversation is told once that its request was rejected (beside the
    # step's own rejection, which the conversation follows too)
    async with SESSIONS.of(app.state)() as session:
        said = (
            await session.scalars(
                select(Message.content).where(Message.conversation_id == uuid.UUID(conversation))
            )
        ).all()
    assert [s for s in said if s.startswith("The request") and "rejected" in s] == [
        f"The request “{plan['spec']['description']}” was rejected by an expert."
    ]

    # another org sees none of it; an expert may not manage the webhook
    r = await client.get(f"/orgs/{orgs.org_a}/webhooks/deliveries", headers=orgs.admin_b.headers)
    assert r.status_code == 404
    r = await put_hook(client, orgs.expert, orgs.org_a, url=receiver.url)
    assert r.status_code == 403 and r.json()["code"] == "forbidden"


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://169.254.169.254/latest/meta-data", "address_forbidden"),
        ("https://10.0.0.7/hook", "address_forbidden"),
        ("https://[::ffff:127.0.0.2]/hook", "address_forbidden"),
        ("https://internal.example/hook", "address_forbidden"),  # resolves to a private one
        ("http://hooks.example/hook", "scheme_not_allowed"),
        ("https://user:pw@hooks.example/hook", "userinfo"),
        ("ftp://hooks.example/hook", "invalid_url"),
    ],
)
async def test_a_webhook_cannot_target_internal_addresses(
    reader: httpx.AsyncClient, shared: Shared, url: str, reason: str
) -> None:
    """Refused, so nothing is written: the module's orgs serve every case."""
    client, orgs, resolver = reader, shared.orgs, shared.resolver
    resolver.names.update({"internal.example": ["10.1.2.3"], "hooks.example": ["93.184.216.34"]})
    r = await put_hook(client, orgs.admin_a, orgs.org_a, url=url)
    assert r.status_code == 422, r.text
    assert r.json()["code"] == "integration_endpoint_refused"
    assert r.json()["details"]["reason"] == reason
    gone = await client.get(f"/orgs/{orgs.org_a}/webhooks", headers=orgs.admin_a.headers)
    assert gone.status_code == 404


async def test_a_given_secret_is_never_answered(
    client: httpx.AsyncClient, orgs: Orgs, resolver: Any
) -> None:
    resolver.names["hooks.example"] = ["93.184.216.34"]
    chosen = "s" * 40
    r = await put_hook(
        client,
        orgs.admin_a,
        orgs.org_a,
        url="https://hooks.example/h",
        secret=chosen,
        events=["completed"],
    )
    assert r.status_code == 200, r.text
    assert chosen not in r.text and "secret" not in r.json()
    assert r.json()["events"] == ["completed"]
    r = await put_hook(
        client, orgs.admin_a, orgs.org_a, url="https://hooks.example/h", events=["nope"]
    )
    assert r.status_code == 422
    r = await client.delete(f"/orgs/{orgs.org_a}/webhooks", headers=orgs.admin_a.headers)
    assert r.status_code == 204
    r = await client.delete(f"/orgs/{orgs.org_a}/webhooks", headers=orgs.admin_a.headers)
    assert r.status_code == 404


@pytest.fixture
async def served(app: FastAPI) -> AsyncIterator[str]:
    """The app (its lifespan already entered) served over real HTTP on loopback: the
    event stream needs a server that streams."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="off", log_level="warning")
    )
    running = asyncio.create_task(server.serve())
    await until(lambda: _started(server), lambda started: started, within=10)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    with contextlib.suppress(asyncio.CancelledError):
        await running


async def _started(server: uvicorn.Server) -> bool:
    return server.started


async def read_events(
    base: str, caller: Caller, until_events: int, last_id: str | None = None, within: float = 30
) -> tuple[list[dict[str, str]], str]:
    """Read the stream until `until_events` events came; the events and the raw text."""
    headers = {**caller.headers, "Accept": "text/event-stream"}
    if last_id is not None:
        headers["Last-Event-ID"] = last_id
    text = ""
    async with (
        httpx.AsyncClient(base_url=base, timeout=within) as http,
        http.stream("GET", "/human-tasks/events", headers=headers) as answer,
    ):
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        deadline = time.monotonic() + within
        async for chunk in answer.aiter_text():
            text += chunk
            if len(parse_sse(text)) >= until_events or time.monotonic() > deadline:
                break
    return parse_sse(text), text


async def test_the_event_stream_carries_only_my_orgs_events_and_resumes(
    served: str, tasks: TaskApi, orgs: Orgs, client: httpx.AsyncClient
) -> None:
    r = await client.get("/human-tasks/events")
    assert r.status_code == 401

    async def create_later(caller: Caller, org: str) -> dict[str, Any]:
        await asyncio.sleep(1.0)
        return await tasks.create(caller, org, steps=ONE_STEP)

    # org B's expert connects first; a task of org A then one of org B
    reader_b = asyncio.create_task(read_events(served, orgs.expert_b, 1))
    reader_a = asyncio.create_task(read_events(served, orgs.expert, 1))
    made_a = await create_later(orgs.requester, orgs.org_a)
    seen_a, _ = await reader_a
    made_b = await tasks.create(orgs.admin_b, orgs.org_b, steps=ONE_STEP)
    seen_b, _ = await reader_b
    assert [json.loads(e["data"])["data"]["task_id"] for e in seen_a] == [made_a["id"]]
    assert seen_a[0]["event"] == "decision_needed"
    assert [json.loads(e["data"])["data"]["task_id"] for e in seen_b] == [made_b["id"]]

    # reconnecting with Last-Event-ID gets what happened while away, nothing before
    mark = seen_a[0]["id"]
    decided = await tasks.decide(orgs.expert, made_a["id"], "only", "reject", {"feedback": "no"})
    assert decided.status_code == 200, decided.text
    again, _ = await read_events(served, orgs.expert, 2, last_id=mark)
    kinds = {e["event"] for e in again}
    assert kinds <= {"decided", "rejected"} and "decided" in kinds
    assert all(int(e["id"]) > int(mark) for e in again)
    assert all(json.loads(e["data"])["org_id"] == orgs.org_a for e in again)

    # an idle stream sends heartbeats
    _, idle = await read_events(served, orgs.expert_b, 99, within=1.5)
    assert ": heartbeat" in idle


@pytest.mark.parametrize("last_id", [b"abc", b"-1", b"9" * 40, "\u00e9t\u00e9".encode(), b"0x1"])
async def test_any_last_event_id_starts_a_stream(shared: Shared, last_id: bytes) -> None:
    served, orgs = shared.base, shared.orgs
    headers: dict[str, str | bytes] = {**orgs.expert.headers, "Last-Event-ID": last_id}
    async with (
        httpx.AsyncClient(base_url=served, timeout=10) as http,
        http.stream("GET", "/human-tasks/events", headers=headers) as answer,
    ):
        assert answer.status_code == 200
        async for chunk in answer.aiter_text():
            assert chunk.startswith("retry: ")
            break
