"""Plan bindings: who asked an agent for a plan, recorded before the agent is asked
(`plan_bindings`, keyed by the plan request's id), so that a late, failing or lying agent
cannot leave the asker free to approve their own request.

Revision ID: 0014_plan_bindings
Revises: 0013_admins
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014_plan_bindings"
down_revision: str | None = "0013_admins"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "plan_bindings",
        sa.Column("request_id", sa.String(64), nullable=False),
        sa.Column("org_id", sa.Uuid(), nullable=False),
        sa.Column("agent", sa.String(253), nullable=False),
        sa.Column("requester", sa.String(200), nullable=False),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("task", sa.String(253), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"], ["orgs.id"], name="fk_plan_bindings_org_id_orgs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("request_id", name="pk_plan_bindings"),
    )
    op.create_index(
        "ix_plan_bindings_org_agent", "plan_bindings", ["org_id", "agent", "created_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_plan_bindings_org_agent", table_name="plan_bindings")
    op.drop_table("plan_bindings")
