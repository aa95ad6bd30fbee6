"""Alembic environment: runs the revisions on the connection `platform_api.db.migrate` hands
over in `config.attributes["connection"]` (online mode only; no engine is built here)."""

from __future__ import annotations

from alembic import context

from platform_api.models import Base

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run the migrations through platform_api.db.migrate()")
context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
