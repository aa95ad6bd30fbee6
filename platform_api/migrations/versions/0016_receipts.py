"""Receipts: the signed receipt of each tool call that reached an upstream and was
answered (`tool_calls.receipt`, `humanwork_core.receipts`), kept with the ledger row so
that a replay answers the very same receipt and a task's receipts can be listed.

Revision ID: 0016_receipts
Revises: 0015_clients
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016_receipts"
down_revision: str | None = "0015_clients"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("tool_calls") as batch:
        batch.add_column(sa.Column("receipt", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tool_calls") as batch:
        batch.drop_column("receipt")
