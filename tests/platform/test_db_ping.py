"""Pooled PostgreSQL connections that rested are pinged before use, and one whose server
side went away meanwhile is replaced without failing the request that checks it out
(`db._ping_when_idle`, which replaced `pool_pre_ping` on every checkout); a burst as
wide as the pool keeps its connections open for the next one."""

from __future__ import annotations

import asyncio
import time

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from platform_api.db import make_engine

BACKEND = text("SELECT pg_backend_pid()")
ALIVE = text("SELECT count(*) FROM pg_stat_activity WHERE pid = :pid")


async def _kill_pooled_backend(engine: AsyncEngine, database_url: str, rest: float = 0.0) -> int:
    """Use a connection of `engine`'s pool, then end its server process from outside and
    wait until the server no longer lists it; return once the connection rested `rest`
    seconds in the pool."""
    async with engine.connect() as conn:
        pid: int = (await conn.execute(BACKEND)).scalar_one()
    returned = time.monotonic()
    other = make_engine(database_url)
    try:
        async with other.connect() as conn:
            await conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
            deadline = time.monotonic() + 60
            while (await conn.execute(ALIVE, {"pid": pid})).scalar_one():
                assert time.monotonic() < deadline, f"backend {pid} did not end"
                await asyncio.sleep(0.02)
    finally:
        await other.dispose()
    resting = rest - (time.monotonic() - returned)
    if resting > 0:  # the condition is the time itself: longer than the ping threshold
        await asyncio.sleep(resting)
    return pid


async def test_a_rested_connection_whose_backend_died_is_replaced(database_url: str) -> None:
    engine = make_engine(database_url, ping_after_idle=0.05)
    try:
        pid = await _kill_pooled_backend(engine, database_url, rest=0.1)
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


async def _burst(engine: AsyncEngine, width: int) -> set[int]:
    """`width` connections of `engine` held at once, then all given back; their backends."""
    entered, release = asyncio.Barrier(width + 1), asyncio.Event()

    async def hold() -> int:
        async with engine.connect() as conn:
            pid: int = (await conn.execute(BACKEND)).scalar_one()
            await entered.wait()
            await release.wait()
            return pid

    held = [asyncio.create_task(hold()) for _ in range(width)]
    await entered.wait()
    release.set()
    return set(await asyncio.gather(*held))


@pytest.mark.parametrize(("pool_size", "kept"), [(12, 12), (4, 4)])
async def test_a_burst_within_the_pool_keeps_its_connections_open(
    database_url: str, pool_size: int, kept: int
) -> None:
    """Issue 17: the connections of a burst as wide as the pool stay open for the next one
    (the same backends serve it, nothing is opened again); beyond the pool, the overflow's
    are closed after use and the next burst opens them afresh."""
    engine = make_engine(database_url, pool_size=pool_size, pool_overflow=20)
    try:
        first = await _burst(engine, 12)
        second = await _burst(engine, 12)
        assert len(first) == len(second) == 12
        assert len(first & second) == kept
    finally:
        await engine.dispose()
