"""An org's MCP servers as upstreams: `mcp_servers` (the URL, the auth encrypted like an
integration's credentials) and `mcp_tools` (each tool's definition as discovered, its
hash, the server's annotations and the risk the org's admin set).

Revision ID: 0017_mcp_servers
Revises: 0016_receipts
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017_mcp_servers"
down_revision: str | None = "0016_receipts"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "mcp_servers",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("org_id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(30), nullable=False),
        sa.Column("url", sa.String(2048), nullable=False),
        sa.Column("auth_key_id", sa.String(50), nullable=True),
        sa.Column("auth_nonce", sa.LargeBinary(), nullable=True),
        sa.Column("auth_ciphertext", sa.LargeBinary(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_by", sa.String(100), nullable=False),
        sa.Column("refreshed_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"], ["orgs.id"], name="fk_mcp_servers_org_id_orgs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_mcp_servers"),
        sa.UniqueConstraint("org_id", "name", name="uq_mcp_servers_org_id"),
    )
    op.create_table(
        "mcp_tools",
        sa.Column("server_id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("definition", sa.JSON(), nullable=False),
        sa.Column("definition_hash", sa.String(80), nullable=False),
        sa.Column("annotations", sa.JSON(), nullable=True),
        sa.Column("risk", sa.String(16), nullable=True),
        sa.ForeignKeyConstraint(
            ["server_id"],
            ["mcp_servers.id"],
            name="fk_mcp_tools_server_id_mcp_servers",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("server_id", "name", name="pk_mcp_tools"),
    )


def downgrade() -> None:
    op.drop_table("mcp_tools")
    op.drop_table("mcp_servers")
