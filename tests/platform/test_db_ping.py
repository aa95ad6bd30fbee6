"""Pooled PostgreSQL connections that rested are pinged before use, and one whose server
side went away meanwhile is replaced without failing the request that checks it out
(`db._ping_when_idle`, which replaced `pool_pre_ping` on every checkout)."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from platform_api.db import make_engine

BACKEND = text("SELECT pg_backend_pid()")


async def _kill_pooled_backend(engine: AsyncEngine, database_url: str) -> int:
    """Use a connection of `engine`'s pool, then end its server process from outside."""
    async with engine.connect() as conn:
        pid: int = (await conn.execute(BACKEND)).scalar_one()
    other = make_engine(database_url)
    try:
        async with other.connect() as conn:
            await conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
    finally:
        await other.dispose()
    await asyncio.sleep(0.2)
    return pid


async def test_a_rested_connection_whose_backend_died_is_replaced(database_url: str) -> None:
    engine = make_engine(database_url, ping_after_idle=0.05)
    try:
        pid = await _kill_pooled_backend(engine, database_url)
        async with engine.connect() as conn:  # pinged, found dead, replaced
            assert (await conn.execute(BACKEND)).scalar_one() != pid
    finally:
        await engine.dispose()


async def test_a_connection_used_moments_ago_is_not_pinged(database_url: str) -> None:
    """The trade-off, shown: no round trip is spent on a connection that just served; if
    its server side died in between, that one use fails and the pool starts afresh."""
    engine = make_engine(database_url, ping_after_idle=60)
    try:
        pid = await _kill_pooled_backend(engine, database_url)
        with pytest.raises(DBAPIError):
            async with engine.connect() as conn:  # not pinged: the dead backend is used
                await conn.execute(text("SELECT 1"))
        async with engine.connect() as conn:
            assert (await conn.execute(BACKEND)).scalar_one() != pid
    finally:
        await engine.dispose()
