"""Failed sign-ins in the database (`login_failures`), so that every platform replica
counts the same failures against a username or a client address.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision: str | None = "0006"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "login_failures",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("scope", sa.String(10), nullable=False),
        sa.Column("key", sa.String(320), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_login_failures"),
    )
    op.create_index("ix_login_failures_at", "login_failures", ["at"])
    op.create_index("ix_login_failures_scope_key_at", "login_failures", ["scope", "key", "at"])


def downgrade() -> None:
    op.drop_table("login_failures")
