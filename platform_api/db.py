"""Database plumbing: the async engine and session factory, the programmatic Alembic
upgrade, and the request session dependency that owns the transaction.

A request gets one `AsyncSession` inside one transaction: committed when the endpoint
returns, rolled back when it raises. Services flush, they never commit.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated

from alembic import command
from alembic.config import Config
from fastapi import Depends, Request
from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def make_engine(url: str) -> AsyncEngine:
    """An async engine for `url` (asyncpg or aiosqlite)."""
    if url.startswith("sqlite"):
        return create_async_engine(url, connect_args={"timeout": 30})
    return create_async_engine(url, pool_pre_ping=True)


def make_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """The session factory of an engine; objects stay usable after commit."""
    return async_sessionmaker(engine, expire_on_commit=False)


def alembic_config() -> Config:
    """An Alembic configuration pointing at the packaged migrations (no alembic.ini)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def _upgrade(connection: Connection, revision: str) -> None:
    cfg = alembic_config()
    cfg.attributes["connection"] = connection
    command.upgrade(cfg, revision)


def _downgrade(connection: Connection, revision: str) -> None:
    cfg = alembic_config()
    cfg.attributes["connection"] = connection
    command.downgrade(cfg, revision)


MIGRATION_LOCK = 0x68756D616E  # "human": the advisory lock key of schema migrations


async def migrate(engine: AsyncEngine, revision: str = "head") -> None:
    """Bring the database of `engine` up to `revision` (idempotent). On PostgreSQL the
    upgrade holds a transaction-scoped advisory lock, so replicas (or init containers)
    starting together migrate one after the other instead of racing."""
    async with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
        await conn.run_sync(_upgrade, revision)


async def downgrade(engine: AsyncEngine, revision: str) -> None:
    """Take the database of `engine` down to `revision` (`base` removes everything)."""
    async with engine.begin() as conn:
        await conn.run_sync(_downgrade, revision)


async def get_session(request: Request) -> AsyncIterator[AsyncSession]:
    """The request's session, inside a transaction committed when the endpoint succeeds."""
    factory: async_sessionmaker[AsyncSession] = request.app.state.platform.sessions
    async with factory() as session, session.begin():
        yield session


Session = Annotated[AsyncSession, Depends(get_session, scope="function")]
