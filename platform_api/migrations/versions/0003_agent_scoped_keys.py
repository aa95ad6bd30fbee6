"""Keys scoped per agent: the primary keys of tool_calls (the tool proxy's ledger) and
agent_events (deduplicated signed events) become (org_id, agent_id, idempotency_key), so
that one agent's keys can neither pre-empt nor replay another's. Existing rows are kept
(each already names its agent).

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None

TABLES = ("tool_calls", "agent_events")


def _primary_key(table: str, columns: list[str]) -> None:
    name = f"pk_{table}"
    if op.get_bind().dialect.name == "postgresql":
        op.drop_constraint(name, table, type_="primary")
        op.create_primary_key(name, table, columns)
        return
    # SQLite cannot alter a primary key: batch mode copies the table into a new one
    with op.batch_alter_table(table, recreate="always") as batch:
        batch.create_primary_key(name, columns)


def upgrade() -> None:
    for table in TABLES:
        _primary_key(table, ["org_id", "agent_id", "idempotency_key"])


def downgrade() -> None:
    # fails (duplicate key) if two agents of one org used the same key meanwhile
    for table in TABLES:
        _primary_key(table, ["org_id", "idempotency_key"])
