"""The tools' hourly rate counted in the database (issue 15, item 10), on the embedded
SQLite default (PostgreSQL is exercised through the proxy in
tests/platform_k8s/test_tool_limits.py): one upsert counts up to the limit, refuses beyond
it with the seconds to the next hour, and a new hour starts afresh."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import async_sessionmaker

from platform_api.agent_api import limits
from platform_api.db import make_engine, migrate
from platform_api.errors import ToolRateLimited
from platform_api.models import Org

T = datetime(2026, 12, 1, 9, 59, 30, tzinfo=UTC)


async def test_the_rate_counts_up_to_the_limit_then_refuses_until_the_next_hour(
    tmp_path: Path,
) -> None:
    engine = make_engine(f"sqlite+aiosqlite:///{tmp_path / 'platform.db'}")
    try:
        await migrate(engine)
        sessions = async_sessionmaker(engine, expire_on_commit=False)
        org = uuid.uuid4()
        async with sessions() as session, session.begin():
            session.add(Org(id=org, slug="acme", name="Acme", namespace="org-acme"))
        counts = []
        for _ in range(2):
            async with sessions() as session, session.begin():
                counts.append(await limits.take(session, org, "web", 2, T))
        assert counts == [1, 2]
        with pytest.raises(ToolRateLimited) as refused:
            async with sessions() as session, session.begin():
                await limits.take(session, org, "web", 2, T)
        assert refused.value.response_headers() == {"Retry-After": "30"}
        async with sessions() as session, session.begin():  # another tool: its own count
            assert await limits.take(session, org, "shopify", 2, T) == 1
        async with sessions() as session, session.begin():  # the next hour
            assert await limits.take(session, org, "web", 2, T.replace(hour=10, minute=0)) == 1
    finally:
        await engine.dispose()
