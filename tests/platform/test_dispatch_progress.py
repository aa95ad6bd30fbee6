"""A plan a client asked for reports its progress into the client's conversation: the
notifier (fed as the task watch feeds it, real PostgreSQL) writes one system message per
step event (a decision waits, a rejection with its feedback) with `meta` for the portal,
and a second replica, or the same state seen again, writes none twice."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from humanwork_core.resources import AgenticTask
from platform_api.db import make_engine, make_sessionmaker
from platform_api.models import Conversation, Message, NotifyEvent, Org
from platform_api.notify.watch import TaskNotifier
from tests.platform.conftest import make_settings
from tests.platform.dispatch_support import until

STEP = {"id": "write", "description": "Set inventory of SKU-1 to 7", "tool": "shopify"}


def _task(org: Org, cid: uuid.UUID | None, status: dict[str, Any]) -> AgenticTask:
    spec: dict[str, Any] = {
        "orgId": str(org.id),
        "agentRef": {"name": "agent"},
        "description": "Reconcile October",
        "requestedBy": "agent:agent",
        "steps": [{**STEP, "risk": "high"}],
    }
    if cid is not None:
        spec["conversationId"] = str(cid)
    return AgenticTask.from_wire(
        {
            "apiVersion": "humanwork.io/v1alpha1",
            "kind": "AgenticTask",
            "metadata": {"name": "plan-1", "namespace": org.namespace, "uid": "uid-plan-1"},
            "spec": spec,
            "status": status,
        }
    )


WAITING = {"phase": "PendingApproval", "steps": [{"id": "write"}]}


def _rejected() -> dict[str, Any]:
    decision = {
        "verdict": "reject",
        "by": "expert-a",
        "at": datetime.now(UTC).isoformat(),
        "feedback": "Only SKU-2 is off",
        "idempotencyKey": "k-1",
        "stepHash": "0" * 64,
    }
    return {"phase": "PendingApproval", "steps": [{"id": "write", "decision": decision}]}


@pytest.fixture
async def sessions(database_url: str) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    engine = make_engine(database_url)
    yield make_sessionmaker(engine)
    await engine.dispose()


@contextlib.asynccontextmanager
async def _running(*notifiers: TaskNotifier) -> AsyncIterator[None]:
    runners = [asyncio.create_task(n.run()) for n in notifiers]
    try:
        yield
    finally:
        for runner in runners:
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner


async def _said(sessions: async_sessionmaker[AsyncSession], cid: uuid.UUID) -> list[Message]:
    async with sessions() as session:
        rows = await session.execute(
            select(Message).where(Message.conversation_id == cid).order_by(Message.id)
        )
        return list(rows.scalars())


async def _events(sessions: async_sessionmaker[AsyncSession], org: Org) -> int:
    async with sessions() as session:
        found = await session.execute(select(NotifyEvent).where(NotifyEvent.org_id == org.id))
        return len(list(found.scalars()))


async def test_each_step_event_is_told_once_in_the_conversation(
    database_url: str, sessions: async_sessionmaker[AsyncSession]
) -> None:
    org = Org(slug=f"p-{uuid.uuid4().hex[:6]}", name="P", namespace="org-progress")
    async with sessions() as session, session.begin():
        session.add(org)
        await session.flush()
        conversation = Conversation(org_id=org.id, subject="October")
        session.add(conversation)
    cid = conversation.id
    settings = make_settings(database_url, notify_interval_seconds=3600)
    one, two = (TaskNotifier(sessions, settings, deliverer=None) for _ in range(2))
    async with _running(one, two):
        for notifier in (one, two, one):  # two replicas, and a relist
            notifier.observe(_task(org, cid, WAITING))
        said = await until(lambda: _said(sessions, cid), lambda m: len(m) >= 1)
        for notifier in (two, one, two):
            notifier.observe(_task(org, cid, _rejected()))
        said = await until(lambda: _said(sessions, cid), lambda m: len(m) >= 2)
        # the first rejection is recorded; the notifiers' later looks find nothing new
        one.observe(_task(org, cid, _rejected()))
        two.observe(_task(org, cid, WAITING))
        await until(lambda: _events(sessions, org), lambda n: n >= 2)
        said = await _said(sessions, cid)
    assert [(m.role, m.author, m.internal) for m in said] == [("system", "platform", False)] * 2
    assert said[0].content == "The step “Set inventory of SKU-1 to 7” waits for an expert's review."
    assert said[0].meta == {"event": "step_waiting", "task": "plan-1", "step": "write"}
    assert said[1].content.endswith(
        "rejected the step “Set inventory of SKU-1 to 7”: Only SKU-2 is off"
    )
    assert said[1].meta == {
        "event": "step_rejected",
        "task": "plan-1",
        "step": "write",
        "feedback": "Only SKU-2 is off",
    }


def _ran(state: str, attempt: int = 1, **fields: Any) -> dict[str, Any]:
    """The step approved and its run ended in `state` (as its agent writes it)."""
    at = datetime.now(UTC).isoformat()
    decision = {
        "verdict": "approve",
        "by": "expert-a",
        "at": at,
        "idempotencyKey": "k-1",
        "stepHash": "0" * 64,
    }
    run = {"state": state, "attempt": attempt, "startedAt": at, "finishedAt": at, **fields}
    return {
        "phase": "InProgress",
        "steps": [{"id": "write", "decision": decision, "execution": run}],
    }


async def test_each_run_of_a_step_is_told_once_with_its_result(
    database_url: str, sessions: async_sessionmaker[AsyncSession]
) -> None:
    org = Org(slug=f"r-{uuid.uuid4().hex[:6]}", name="R", namespace="org-results")
    async with sessions() as session, session.begin():
        session.add(org)
        await session.flush()
        conversation = Conversation(org_id=org.id, subject="October")
        session.add(conversation)
    cid = conversation.id
    settings = make_settings(database_url, notify_interval_seconds=3600)
    one, two = (TaskNotifier(sessions, settings, deliverer=None) for _ in range(2))
    secret = "sk_live_4f9a8b7c6d5e4f3a2b1c"
    runs = [
        _ran("Failed", error=f"Shopify answered 500; api_key={secret}"),
        _ran("OutcomeUnknown", 2, error="the connection dropped after sending"),
        _ran("Succeeded", 3, result={"summary": "SKU-1 set to 7", "token": secret}),
    ]
    async with _running(one, two):
        for done, status in enumerate(runs, start=2):  # the approval, then one per run
            for notifier in (one, two, one):  # two replicas, and a relist
                notifier.observe(_task(org, cid, status))
            await until(lambda: _events(sessions, org), lambda n, done=done: n >= done)
    # a restart: a notifier that remembers nothing sees every state again, then the task
    # complete (its one new event: recorded after the earlier states' events were looked at)
    three = TaskNotifier(sessions, settings, deliverer=None)
    completed = {**runs[-1], "phase": "Completed"}
    async with _running(three):
        for status in [*runs, completed]:
            three.observe(_task(org, cid, status))
        await until(lambda: _events(sessions, org), lambda n: n >= len(runs) + 2)
    said = await _said(sessions, cid)
    told = [(m.meta or {}).get("event") for m in said]
    for event in ("step_failed", "step_outcome_unknown", "step_executed"):
        assert told.count(event) == 1, told
    by_event = {(m.meta or {}).get("event"): m for m in said}
    failed = by_event["step_failed"]
    assert failed.content == (
        "The step “Set inventory of SKU-1 to 7” failed. Reason: Shopify answered 500; "
        "api_key=[token]"
    )
    assert failed.meta == {
        "event": "step_failed",
        "task": "plan-1",
        "step": "write",
        "result": "Shopify answered 500; api_key=[token]",
    }
    unknown = by_event["step_outcome_unknown"]
    assert "whether it took effect is not known yet" in unknown.content
    executed = by_event["step_executed"]
    assert executed.content == (
        "The step “Set inventory of SKU-1 to 7” was carried out. Result: SKU-1 set to 7"
    )
    assert all(secret not in m.content for m in said)
    assert all((m.role, m.author, m.internal) == ("system", "platform", False) for m in said)
    assert told.count("step_approved") == 1
