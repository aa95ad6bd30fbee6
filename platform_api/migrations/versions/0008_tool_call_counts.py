"""The tools' per-org hourly call counts: `tool_call_counts`, one row
per org, tool and hour, counted by the tool proxy against the tool config's `ratePerHour`.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision: str | None = "0007"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "tool_call_counts",
        sa.Column("org_id", sa.Uuid(), nullable=False),
        sa.Column("tool", sa.String(100), nullable=False),
        sa.Column("window_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"], ["orgs.id"], name="fk_tool_call_counts_org_id_orgs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("org_id", "tool", "window_start", name="pk_tool_call_counts"),
    )


def downgrade() -> None:
    op.drop_table("tool_call_counts")
