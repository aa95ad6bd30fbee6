"""The lease of a tool call's claim (the ledger's `started` row), on real PostgreSQL and the
real apiserver: a platform that died mid-call leaves its claim `started`. While the lease
lasts, a repeat answers `tool_call_in_progress` with the lease it has left; once it ran out,
the repeat turns the claim `unknown` in the database (an expert decides) and never reaches
the upstream. The claim is written as the dead platform wrote it, with the agent's key.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import httpx
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

from humanwork_dev.fakes.shopify import FakeShopify
from platform_api.agent_api.ledger import STALE_CLAIM_SECONDS, request_hash
from platform_api.agent_api.schemas import ToolCallIn
from platform_api.models import ToolCall
from tests.platform_k8s.conftest import Orgs, TaskApi
from tests.platform_k8s.test_tool_ledger import (  # noqa: F401 (fixtures)
    FIX,
    agent,
    approved_write,
    settings,
    shop,
)
from tests.platform_k8s.test_tool_proxy import call

WRITE_PATH = "inventory_levels/adjust.json"


async def dead_platforms_claim(
    database_url: str, tasks: TaskApi, orgs: Orgs, task_id: str, age: float
) -> tuple[uuid.UUID, str, str]:
    """The `started` claim a platform killed mid-call left `age` seconds ago; its key."""
    name = task_id.split("/")[1]
    uid = (await tasks.get(orgs.expert, task_id)).json()["uid"]
    key = (uuid.UUID(orgs.org_a), f"{orgs.ns_a}/agent", f"step:{uid}/fix")
    body = ToolCallIn(
        action="adjustInventoryLevel", params=FIX, idempotencyKey="k", task=name, step="fix"
    )
    engine = create_async_engine(database_url)
    async with async_sessionmaker(engine)() as session, session.begin():
        session.add(
            ToolCall(
                org_id=key[0],
                agent_id=key[1],
                idempotency_key=key[2],
                tool="shopify",
                action=body.action,
                task=name,
                step="fix",
                request_hash=request_hash("shopify", body),
                state="started",
                status_code=0,
                result={},
                created_at=datetime.now(UTC) - timedelta(seconds=age),
            )
        )
    await engine.dispose()
    return key


async def claim_state(database_url: str, key: tuple[uuid.UUID, str, str]) -> str | None:
    engine = create_async_engine(database_url)
    async with async_sessionmaker(engine)() as session:
        row = await session.get(ToolCall, key)
        state = row.state if row is not None else None
    await engine.dispose()
    return state


async def test_a_dead_platforms_claim_past_its_lease_turns_unknown_for_an_expert(
    client: httpx.AsyncClient,
    database_url: str,
    tasks: TaskApi,
    orgs: Orgs,
    agent: dict[str, str],  # noqa: F811
    shop: FakeShopify,  # noqa: F811
) -> None:
    task_id, name = await approved_write(tasks, orgs)
    key = await dead_platforms_claim(database_url, tasks, orgs, task_id, STALE_CLAIM_SECONDS + 5)
    first = await call(client, agent, "adjustInventoryLevel", FIX, key="k", task=name, step="fix")
    assert first.status_code == 409, first.text
    assert first.json()["code"] == "tool_call_outcome_unknown", first.text
    assert await claim_state(database_url, key) == "unknown"  # kept for an expert, in the DB
    again = await call(client, agent, "adjustInventoryLevel", FIX, key="k", task=name, step="fix")
    assert again.json()["code"] == "tool_call_outcome_unknown", again.text
    assert shop.requests_to(WRITE_PATH) == [] and shop.side_effects == []


async def test_a_claim_within_its_lease_answers_in_progress_with_the_lease_left(
    client: httpx.AsyncClient,
    database_url: str,
    tasks: TaskApi,
    orgs: Orgs,
    agent: dict[str, str],  # noqa: F811
    shop: FakeShopify,  # noqa: F811
) -> None:
    """The control: a claim younger than its lease may be a live call: the repeat waits."""
    task_id, name = await approved_write(tasks, orgs)
    key = await dead_platforms_claim(database_url, tasks, orgs, task_id, 60)
    held = await call(client, agent, "adjustInventoryLevel", FIX, key="k", task=name, step="fix")
    assert held.status_code == 409, held.text
    assert held.json()["code"] == "tool_call_in_progress", held.text
    left = int(held.json()["details"]["staleInSeconds"])
    assert STALE_CLAIM_SECONDS - 60 - 30 <= left <= STALE_CLAIM_SECONDS - 60 + 1
    assert held.headers["Retry-After"] == "1"
    assert await claim_state(database_url, key) == "started"
    assert shop.requests_to(WRITE_PATH) == [] and shop.side_effects == []
