"""Org approval policies: `orgs.approval_policy` (null: the strict default) and the
`policy.manage` capability for the admin role.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision: str | None = "0005"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.add_column("orgs", sa.Column("approval_policy", sa.JSON(), nullable=True))
    access = sa.table(
        "access_map", sa.column("role", sa.String), sa.column("capability", sa.String)
    )
    bind = op.get_bind()
    has_admin = bind.execute(
        sa.select(sa.func.count()).select_from(access).where(access.c.role == "admin")
    ).scalar()
    if has_admin:
        op.bulk_insert(access, [{"role": "admin", "capability": "policy.manage"}])


def downgrade() -> None:
    op.execute("DELETE FROM access_map WHERE capability = 'policy.manage'")
    op.drop_column("orgs", "approval_policy")
