"""Users: the OIDC issuer and subject an external identity is matched by (never an
editable claim such as email or preferred_username). Existing rows are kept; their new
columns are empty until an admin binds an OIDC identity to them.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision: str | None = "0003"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("users") as batch:
        batch.add_column(sa.Column("oidc_issuer", sa.String(length=300), nullable=True))
        batch.add_column(sa.Column("oidc_subject", sa.String(length=255), nullable=True))
        batch.create_unique_constraint("uq_users_oidc_issuer", ["oidc_issuer", "oidc_subject"])


def downgrade() -> None:
    with op.batch_alter_table("users") as batch:
        batch.drop_constraint("uq_users_oidc_issuer", type_="unique")
        batch.drop_column("oidc_subject")
        batch.drop_column("oidc_issuer")
