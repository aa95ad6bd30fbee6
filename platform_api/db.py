"""Database plumbing: the async engine and session factory, the programmatic Alembic
upgrade, and the request session dependency that owns the transaction.

A request gets one `AsyncSession` inside one transaction: committed when the endpoint
returns, rolled back when it raises. Services flush, they never commit; a request that
needs a second connection (a detached write) `release`s its session's first, so no
request holds a pooled connection while it waits for another.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any

from alembic import command
from alembic.config import Config
from asyncpg import (  # type: ignore[import-untyped]
    InterfaceError,
    InternalClientError,
    PostgresError,
)
from fastapi import Depends, Request
from sqlalchemy import Connection, event, make_url, text
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import (
    AsyncConnection,
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.pool import ConnectionPoolEntry
from sqlalchemy.util import greenlet_spawn

from platform_api.privileges import grant_statements
from platform_api.slots import Slot

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


PING_AFTER_IDLE = 5.0
"""Seconds a pooled PostgreSQL connection may rest before its next checkout pings it."""


def make_engine(
    url: str,
    ping_after_idle: float = PING_AFTER_IDLE,
    pool_size: int = 20,
    pool_overflow: int = 10,
) -> AsyncEngine:
    """An async engine for `url` (asyncpg or aiosqlite). PostgreSQL: `pool_size`
    connections kept open, `pool_overflow` more opened in a burst: SQLAlchemy's
    default of 5 kept open was fewer than the connections eight concurrent decisions hold
    (each request's transaction and the deactivation guard's read), so every burst opened
    and closed connections, each open a handshake and each statement prepared afresh."""
    if url.startswith("sqlite"):
        return create_async_engine(url, connect_args={"timeout": 30})
    engine = create_async_engine(url, pool_size=pool_size, max_overflow=pool_overflow)
    _ping_when_idle(engine, ping_after_idle)
    return engine


def _ping_when_idle(engine: AsyncEngine, after: float) -> None:
    """Pessimistic disconnect handling for connections that rested: one that comes back
    to the pool and is checked out again more than `after` seconds later is pinged first
    and replaced when the ping fails (a restarted server, a dropped idle connection).
    SQLAlchemy's `pool_pre_ping` would ping on every checkout, three round trips with
    asyncpg (begin, ping, rollback), on the hot path of every request; a connection that
    served a request moments ago is not pinged (should the server go away just then, that
    request fails and SQLAlchemy replaces the pool's connections)."""
    pool = engine.sync_engine.pool
    dialect = engine.sync_engine.dialect

    @event.listens_for(pool, "checkin")
    def _rested_from(_dbapi: Any, record: ConnectionPoolEntry) -> None:
        record.info[_RESTED_FROM] = time.monotonic()

    @event.listens_for(pool, "checkout")
    def _ping(dbapi: Any, record: ConnectionPoolEntry, _proxy: Any) -> None:
        rested_from = record.info.get(_RESTED_FROM)
        if rested_from is None or time.monotonic() - rested_from <= after:
            return
        try:
            dialect.do_ping(dbapi)
        except Exception as exc:
            raise DisconnectionError("the pooled connection failed its ping") from exc


_RESTED_FROM = "humanwork_rested_from"


def make_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """The session factory of an engine; objects stay usable after commit."""
    return async_sessionmaker(engine, expire_on_commit=False)


def alembic_config() -> Config:
    """An Alembic configuration pointing at the packaged migrations (no alembic.ini)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def _upgrade(connection: Connection, revision: str, app_role: str | None) -> None:
    cfg = alembic_config()
    cfg.attributes["connection"] = connection
    cfg.attributes["app_role"] = app_role
    command.upgrade(cfg, revision)


def _downgrade(connection: Connection, revision: str, app_role: str | None) -> None:
    cfg = alembic_config()
    cfg.attributes["connection"] = connection
    cfg.attributes["app_role"] = app_role
    command.downgrade(cfg, revision)


def app_role_of(database_url: str, owner_url: str | None) -> str | None:
    """The PostgreSQL role the app connects as, when migrations run as another one (the
    owner): the user of `database_url`. None when there is no separate owner URL, or on
    SQLite, or when both URLs name the same user (the app is then the owner)."""
    if owner_url is None or not database_url.startswith("postgresql"):
        return None
    app, owner = make_url(database_url).username, make_url(owner_url).username
    return app if app and app != owner else None


MIGRATION_LOCK = 0x68756D616E  # "human": the advisory lock key of schema migrations


async def migrate(
    engine: AsyncEngine, revision: str = "head", *, app_role: str | None = None
) -> None:
    """Bring the database of `engine` up to `revision` (idempotent). On PostgreSQL the
    upgrade holds a transaction-scoped advisory lock, so replicas (or init containers)
    starting together migrate one after the other instead of racing.

    `app_role` (PostgreSQL, `engine` connected as the schema's owner): the role the app
    connects as; its privileges (`platform_api.privileges`) are granted again after
    the upgrade, so a role named after migration 0005 ran gets them too."""
    async with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
        await conn.run_sync(_upgrade, revision, app_role)
        if app_role and conn.dialect.name == "postgresql":
            for statement in grant_statements(app_role):
                await conn.execute(text(statement))
            await _refuse_a_privileged_app_role(conn, app_role)


async def _refuse_a_privileged_app_role(conn: AsyncConnection, app_role: str) -> None:
    """Fail the migration when the app role could undo its restrictions: a superuser, or
    a member of the owner role, holds the owner's rights over the audit log."""
    privileged = (
        await conn.execute(
            text(
                "SELECT rolsuper OR pg_has_role(rolname, current_user, 'MEMBER') "
                "FROM pg_roles WHERE rolname = :role"
            ),
            {"role": app_role},
        )
    ).scalar_one()
    if privileged:
        raise RuntimeError(
            f"the app role {app_role!r} is a superuser or a member of the owner role: it "
            "could change or cut the audit log; give the app a role of its own"
        )


async def downgrade(engine: AsyncEngine, revision: str, *, app_role: str | None = None) -> None:
    """Take the database of `engine` down to `revision` (`base` removes everything)."""
    async with engine.begin() as conn:
        await conn.run_sync(_downgrade, revision, app_role)


ENGINE: Slot[AsyncEngine] = Slot("engine")
Engine = Annotated[AsyncEngine, Depends(ENGINE)]
"""The app's engine."""

SESSIONS: Slot[async_sessionmaker[AsyncSession]] = Slot("sessions")
Sessions = Annotated[async_sessionmaker[AsyncSession], Depends(SESSIONS)]
"""The app's session factory (for a session of a request's own, outside its
transaction)."""


async def get_session(request: Request, factory: Sessions) -> AsyncIterator[AsyncSession]:
    """The request's session: its transaction is committed when the endpoint succeeds,
    rolled back when it raises. It takes a pooled connection at its first statement and
    holds it to the end, so a request that must wait for another connection (a detached
    audit write, a session of its own) first gives this one back with `release`."""
    async with factory() as session:
        request.state.session = session  # for `abandon`
        try:
            yield session
        except BaseException:
            await session.rollback()
            raise
        await session.commit()


async def release(session: AsyncSession) -> None:
    """Commit the request session's work so far and give its connection back to the pool
    (a later statement takes one again, in a new transaction). A request calls it before
    it waits for another connection: one that holds a connection while waiting for a
    second starves the pool as soon as the pool's size of them wait at once."""
    await session.commit()


async def abandon(request: Request) -> None:
    """Roll back the request session's transaction, if it has one, and give its
    connection back: for a request about to fail that first writes elsewhere (a refusal
    audited in a transaction of its own)."""
    session: AsyncSession | None = getattr(request.state, "session", None)
    if session is not None:
        await session.rollback()


Session = Annotated[AsyncSession, Depends(get_session, scope="function")]

AUTOCOMMIT = "AUTOCOMMIT"
_DRIVER = "humanwork_autocommit_driver"


async def autocommitting(session: AsyncSession) -> None:
    """Make each statement of `session` its own transaction (PostgreSQL; nothing on any
    other database), and keep its driver connection for `autocommit_driver`. Call it
    before the session's first statement."""
    if session.bind is None or session.bind.dialect.name != "postgresql":
        return
    connection = await session.connection(execution_options={"isolation_level": AUTOCOMMIT})
    sync = connection.sync_connection
    assert sync is not None  # the session holds it: checked out, so no I/O below
    driver = sync.connection.driver_connection
    session.info[_DRIVER] = (session.sync_session.get_transaction(), driver)


def autocommit_driver(session: AsyncSession) -> Any | None:
    """The driver's connection (asyncpg) under `session` while it autocommits
    (`autocommitting`, the decision routes' session on PostgreSQL), inside an explicit
    transaction begun on it or not: a statement sent on it directly is then the one the
    session would send, without SQLAlchemy's execution around it. None otherwise, and once
    the session committed or rolled back (a later statement takes a connection anew, in a
    transaction: its BEGIN is the session's to send)."""
    held = session.info.get(_DRIVER)
    if held is None:
        return None
    transaction, driver = held
    return driver if session.sync_session.get_transaction() is transaction else None


@contextlib.asynccontextmanager
async def driver_connection(engine: AsyncEngine) -> AsyncIterator[Any | None]:
    """A pooled connection's driver (asyncpg) for a few statements of its own, each its
    own transaction (no BEGIN, no COMMIT, no session around them): on PostgreSQL; None
    on any other database (the caller takes its session's path). The connection goes
    back to the pool at the end of the block, also when the block raises an error of its
    own or the server refused a statement; a block cancelled (possibly mid-statement),
    timed out or that lost its connection gives it up instead (`_spoils`): the pool never
    saw what was sent on it."""
    if engine.dialect.name != "postgresql":
        yield None
        return
    raw = await engine.raw_connection()
    driver: Any = raw.driver_connection
    try:
        yield driver
    except BaseException as exc:
        if _spoils(exc) or driver.is_closed():
            await greenlet_spawn(raw.invalidate)
        raise
    finally:
        await greenlet_spawn(raw.close)


def _spoils(exc: BaseException) -> bool:
    """Whether a connection whose block raised `exc` may be in an unknown state: a
    cancellation or any other non-`Exception`, an OS-level error (a timeout, a lost
    connection) or the driver's own trouble (asyncpg's `InterfaceError`, an operation
    still in progress). The server's refusal of a statement (`PostgresError`) and the
    block's own errors leave it as it was."""
    if isinstance(exc, PostgresError):
        return False
    return not isinstance(exc, Exception) or isinstance(
        exc, OSError | InterfaceError | InternalClientError
    )
