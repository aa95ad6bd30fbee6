"""A decision request's statements without a BEGIN and COMMIT around the request.

A decision's request reads (the caller, the org's policy and active flag, the step's
pins and requester) and then, after its status write, writes once: its audit row. Run as
one transaction, that is two more round trips to PostgreSQL (BEGIN before the first read,
COMMIT after the last write) for nothing the reads need: each read is one statement, and
so is the audit row's append (`floor.audit.repository.APPEND_SQL`), which locks its
chain's head for that one statement only. So on PostgreSQL the decision routes' session
runs each statement in its own transaction (`autocommitting`), and what must commit
together does so in an explicit transaction (`together`): a correction the decision
makes is stored with its own audit row and the decision's, all or none.

Where the session already has a transaction (SQLite, or the batch of decisions that opens
one for each item), `together` adds nothing: the session's transaction commits them.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.db import autocommit_driver, autocommitting

__all__ = ["autocommitting", "together"]


@contextlib.asynccontextmanager
async def together(session: AsyncSession) -> AsyncIterator[None]:
    """The statements run inside commit together: in an explicit transaction when the
    session autocommits (rolled back when the block raises; a connection left inside it
    is invalidated, never pooled again), in the session's own transaction otherwise."""
    driver = autocommit_driver(session)
    if driver is None:
        yield
        return
    outer = driver.is_in_transaction()
    try:
        async with driver.transaction():
            yield
    finally:
        if not outer and driver.is_in_transaction():
            # its rollback did not finish (cancelled, or the server went away): the pool,
            # which never saw this transaction, must not lend the connection again
            session.sync_session.connection().invalidate()
