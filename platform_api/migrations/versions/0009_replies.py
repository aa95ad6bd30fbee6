"""Reply drafts and expert corrections: `reply_drafts`,
`corrections`.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision: str | None = "0008"
branch_labels: str | None = None
depends_on: str | None = None

TS = sa.DateTime(timezone=True)


def _org_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["org_id"], ["orgs.id"], name=f"fk_{table}_org_id_orgs", ondelete="CASCADE"
    )


def upgrade() -> None:
    op.create_table(
        "reply_drafts",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("org_id", sa.Uuid(), nullable=False),
        sa.Column("conversation_id", sa.Uuid(), nullable=False),
        sa.Column("agent", sa.String(253), nullable=False),
        sa.Column("message_id", sa.Integer(), nullable=False),
        sa.Column("client_message", sa.String(20000), nullable=False),
        sa.Column("draft", sa.String(32000), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("risk", sa.String(20), nullable=False),
        sa.Column("flag_for_review", sa.Boolean(), nullable=False),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("requested_by", sa.String(200), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("decided_by", sa.String(200), nullable=True),
        sa.Column("decided_at", TS, nullable=True),
        sa.Column("sent_text", sa.String(32000), nullable=True),
        sa.Column("feedback", sa.String(4096), nullable=True),
        sa.Column("sent_message_id", sa.Integer(), nullable=True),
        _org_fk("reply_drafts"),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name="fk_reply_drafts_conversation_id_conversations",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_reply_drafts"),
    )
    op.create_index("ix_reply_drafts_org_id", "reply_drafts", ["org_id"])
    op.create_index("ix_reply_drafts_conversation_id", "reply_drafts", ["conversation_id"])
    op.create_index("ix_reply_drafts_state", "reply_drafts", ["state"])
    op.create_table(
        "corrections",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("org_id", sa.Uuid(), nullable=False),
        sa.Column("kind", sa.String(30), nullable=False),
        sa.Column("message", sa.String(32000), nullable=False),
        sa.Column("draft", sa.String(32000), nullable=True),
        sa.Column("corrected", sa.String(32000), nullable=False),
        sa.Column("note", sa.String(4096), nullable=True),
        sa.Column("source", sa.String(400), nullable=False),
        sa.Column("conversation_id", sa.Uuid(), nullable=True),
        sa.Column("by", sa.String(200), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        _org_fk("corrections"),
        sa.PrimaryKeyConstraint("id", name="pk_corrections"),
    )
    op.create_index("ix_corrections_org_id", "corrections", ["org_id"])


def downgrade() -> None:
    op.drop_table("corrections")
    op.drop_table("reply_drafts")
