"""Initial schema: orgs, users, memberships, access map (with its defaults), audit log and
chain heads, tool permissions, integration credentials.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None

DEFAULT_ACCESS_MAP = {
    "viewer": ["tasks.read"],
    "expert": ["tasks.read", "tasks.decide"],
    "operator": ["tasks.read", "tasks.decide", "run.control"],
    "admin": [
        "tasks.read",
        "tasks.decide",
        "run.control",
        "tools.manage",
        "agents.manage",
        "audit.read",
        "access.manage",
        "orgs.manage",
        "users.manage",
    ],
}

TS = sa.DateTime(timezone=True)


def _forbid_audit_changes() -> None:
    """Make audit_log append-only in the database itself: UPDATE, DELETE (and TRUNCATE on
    PostgreSQL) raise. Tampering then needs the owner to disable the triggers, which the
    hash chain still detects."""
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$ "
            "BEGIN RAISE EXCEPTION 'audit_log is append-only'; END $$"
        )
        op.execute(
            "CREATE TRIGGER audit_log_no_change BEFORE UPDATE OR DELETE ON audit_log "
            "FOR EACH ROW EXECUTE FUNCTION audit_log_append_only()"
        )
        op.execute(
            "CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log "
            "FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only()"
        )
    else:
        for event in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER audit_log_no_{event.lower()} BEFORE {event} ON audit_log "
                "BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END"
            )


def _create_orgs() -> None:
    op.create_table(
        "orgs",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("slug", sa.String(40), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("namespace", sa.String(63), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_orgs"),
        sa.UniqueConstraint("slug", name="uq_orgs_slug"),
        sa.UniqueConstraint("namespace", name="uq_orgs_namespace"),
    )


def _create_users() -> None:
    op.create_table(
        "users",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("username", sa.String(100), nullable=False),
        sa.Column("password_hash", sa.String(300), nullable=True),
        sa.Column("role", sa.String(50), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_users"),
        sa.UniqueConstraint("username", name="uq_users_username"),
    )


def _create_memberships() -> None:
    op.create_table(
        "memberships",
        sa.Column("user_id", sa.Uuid(), nullable=False),
        sa.Column("org_id", sa.Uuid(), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name="fk_memberships_user_id_users", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["org_id"], ["orgs.id"], name="fk_memberships_org_id_orgs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("user_id", "org_id", name="pk_memberships"),
    )
    op.create_index("ix_memberships_org_id", "memberships", ["org_id"])


def _create_access_map() -> None:
    access_map = op.create_table(
        "access_map",
        sa.Column("role", sa.String(50), nullable=False),
        sa.Column("capability", sa.String(100), nullable=False),
        sa.PrimaryKeyConstraint("role", "capability", name="pk_access_map"),
    )
    op.bulk_insert(
        access_map,
        [{"role": r, "capability": c} for r, caps in DEFAULT_ACCESS_MAP.items() for c in caps],
    )


def _create_audit_log() -> None:
    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("chain", sa.String(64), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("org_id", sa.Uuid(), nullable=True),
        sa.Column("at", TS, nullable=False),
        sa.Column("actor", sa.String(200), nullable=False),
        sa.Column("action", sa.String(100), nullable=False),
        sa.Column("target", sa.String(300), nullable=False),
        sa.Column("outcome", sa.String(20), nullable=False),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.Column("prev_hash", sa.String(64), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_audit_log"),
        sa.UniqueConstraint("chain", "seq", name="uq_audit_log_chain_seq"),
    )
    op.create_index("ix_audit_log_org_id", "audit_log", ["org_id"])
    op.create_index("ix_audit_log_at", "audit_log", ["at"])
    op.create_index("ix_audit_log_action", "audit_log", ["action"])
    _forbid_audit_changes()


def _create_audit_chain_heads() -> None:
    op.create_table(
        "audit_chain_heads",
        sa.Column("chain", sa.String(64), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.PrimaryKeyConstraint("chain", name="pk_audit_chain_heads"),
    )


def _create_tool_permissions() -> None:
    op.create_table(
        "tool_permissions",
        sa.Column("org_id", sa.Uuid(), nullable=False),
        sa.Column("tool", sa.String(100), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.Column("updated_by", sa.String(100), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"], ["orgs.id"], name="fk_tool_permissions_org_id_orgs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("org_id", "tool", name="pk_tool_permissions"),
    )


def _create_integration_credentials() -> None:
    op.create_table(
        "integration_credentials",
        sa.Column("org_id", sa.Uuid(), nullable=False),
        sa.Column("type", sa.String(50), nullable=False),
        sa.Column("key_id", sa.String(50), nullable=False),
        sa.Column("nonce", sa.LargeBinary(), nullable=False),
        sa.Column("ciphertext", sa.LargeBinary(), nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.Column("updated_by", sa.String(100), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"],
            ["orgs.id"],
            name="fk_integration_credentials_org_id_orgs",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("org_id", "type", name="pk_integration_credentials"),
    )


def upgrade() -> None:
    _create_orgs()
    _create_users()
    _create_memberships()
    _create_access_map()
    _create_audit_log()
    _create_audit_chain_heads()
    _create_tool_permissions()
    _create_integration_credentials()


def downgrade() -> None:
    for table in (
        "integration_credentials",
        "tool_permissions",
        "audit_chain_heads",
        "audit_log",
        "access_map",
        "memberships",
        "users",
        "orgs",
    ):
        op.drop_table(table)
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION audit_log_append_only()")
