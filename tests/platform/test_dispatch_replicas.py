"""Exactly one dispatch per client message across replicas and restarts: two platform
apps (two dispatchers) on one PostgreSQL race over the same messages; a dispatcher that
dies holding a claim (its app shut down mid-dispatch) leaves the message to the other,
which finishes it once, and a plan the dead one had the agent file is not filed again."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from platform_api.app import create_app
from platform_api.settings import Settings
from tests.platform.conftest import Api, RecordingNamespaces, StaticResolver, TwoOrgs, make_settings
from tests.platform.dispatch_support import (
    SEED_REQUEST,
    FakeAgents,
    client_message,
    conversation,
    rows,
    until,
    use,
    user_id,
)

MESSAGES = 20


@pytest.fixture
def settings(database_url: str) -> Settings:
    return make_settings(
        database_url,
        dispatch_interval_seconds=0.05,
        dispatch_timeout_seconds=30,
        dispatch_lease_seconds=31,
    )


@asynccontextmanager
async def replica(settings: Settings, agents: FakeAgents) -> AsyncIterator[FastAPI]:
    """Another platform app (its own dispatcher) on the same database."""
    other = create_app(settings, namespaces=RecordingNamespaces(), resolver=StaticResolver())
    async with other.router.lifespan_context(other):
        use(other, agents)
        yield other


async def _client(api: Api, two_orgs: TwoOrgs, db: AsyncEngine) -> tuple[uuid.UUID, uuid.UUID]:
    made = await api.user(two_orgs.admin, "client-a", "client", [two_orgs.org_a])
    uid = await user_id(db, made.username)
    return uid, await conversation(db, two_orgs.org_a, uid)


async def _settled(db: AsyncEngine, count: int) -> list[dict[str, object]]:
    async def probe() -> list[dict[str, object]]:
        return await rows(db, "SELECT * FROM message_dispatches WHERE state != 'claimed'")

    return await until(probe, lambda r: len(r) >= count)


async def test_two_replicas_dispatch_each_of_twenty_messages_once(
    app: FastAPI, settings: Settings, api: Api, two_orgs: TwoOrgs, db: AsyncEngine
) -> None:
    first, second = FakeAgents(), FakeAgents()
    use(app, first)
    uid, cid = await _client(api, two_orgs, db)
    async with replica(settings, second):
        ids = [
            await client_message(db, cid, "client-a", uid, f"Where is order {n}?")
            for n in range(MESSAGES)
        ]
        done = await _settled(db, MESSAGES)
        assert sorted(int(str(d["message_id"])) for d in done) == ids
        assert {d["state"] for d in done} == {"drafted"}
        assert {d["attempts"] for d in done} == {1}
        drafts = await rows(db, "SELECT message_id FROM reply_drafts")
        assert sorted(int(d["message_id"]) for d in drafts) == ids
        assert first.count("/v1/chat") + second.count("/v1/chat") == MESSAGES


async def test_a_dispatcher_killed_after_claiming_leaves_the_message_to_the_other(
    settings: Settings, api: Api, two_orgs: TwoOrgs, db: AsyncEngine, app: FastAPI
) -> None:
    app.state.dispatcher.paused = True  # two replicas of their own below
    agent = FakeAgents()
    agent.hang_on = "/v1/tasks"  # the agent files the plan, then the dispatcher dies
    uid, cid = await _client(api, two_orgs, db)
    async with replica(settings, agent) as doomed:
        mid = await client_message(db, cid, "client-a", uid, SEED_REQUEST)
        await asyncio.wait_for(agent.reached.wait(), 60)
        await until(lambda: agent_calls(agent), lambda n: n >= 2)
        dead_holder = doomed.state.dispatcher.holder
    # the doomed replica is gone mid-dispatch; its claim holds until the lease ends
    (claim,) = await rows(db, "SELECT * FROM message_dispatches")
    assert claim["state"] == "claimed" and claim["claimed_by"] == dead_holder
    agent.hang_on = None
    async with db.begin() as conn:  # the lease runs out (not waiting the 31 s out)
        await conn.execute(
            text("UPDATE message_dispatches SET lease_until = now() - interval '1 second'")
        )
    async with replica(settings, agent) as survivor:
        (done,) = await _settled(db, 1)
        assert done["state"] == "planned" and done["attempts"] == 2
        assert done["claimed_by"] == survivor.state.dispatcher.holder
    # the second attempt named the same plan request: one task, one binding
    assert len(agent.tasks) == 1 and done["task"] == agent.tasks[f"message-{mid}"]
    assert agent.count("/v1/tasks") == 2
    assert len(await rows(db, "SELECT * FROM plan_bindings")) == 1
    said = await rows(db, "SELECT * FROM messages WHERE role = 'system'")
    assert len(said) == 1


async def agent_calls(agent: FakeAgents) -> int:
    return len(agent.calls)
