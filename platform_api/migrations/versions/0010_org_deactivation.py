"""Org deactivation: `orgs.deactivated_at` (null while active),
`orgs.deactivated_by` and `orgs.suspended_agents` (the AgentInstances the deactivation
deleted, name and spec, restored on reactivation).

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision: str | None = "0009"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.add_column("orgs", sa.Column("deactivated_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("orgs", sa.Column("deactivated_by", sa.String(100), nullable=True))
    op.add_column("orgs", sa.Column("suspended_agents", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("orgs", "suspended_agents")
    op.drop_column("orgs", "deactivated_by")
    op.drop_column("orgs", "deactivated_at")
