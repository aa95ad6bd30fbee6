"""The client's side: a built-in `client` role, who takes part in a conversation, who
wrote each message (and whether it is an expert's internal note), the org's settings for
its clients, and one dispatch record per client message.

- `access_map`: the role `client` holds `conversations.participate` (its own
  conversations, their tasks and progress) and `steps.confirm` (confirming the
  high-stakes steps it started), and is `org.grantable`. It holds nothing else.
- `orgs.clients_share_conversations`: the org's clients see each other's conversations
  (default: each client only those it takes part in).
- `orgs.client_confirm_risks`: the risks a client must confirm on the steps of a plan it
  started (null: `high` and `critical`; an empty list: none).
- `orgs.reply_auto_send`: the admin's rule under which a drafted reply to a client skips
  review (null: every draft is reviewed).
- `conversations.created_by`, `conversation_participants`: who started a conversation
  and who takes part in it.
- `messages.author_user_id`, `messages.internal`, `messages.meta`: the user who wrote a
  message (null for agent and system messages), an expert's internal note (never shown to
  a client), and what a system message reports (a task, a step, a state) for the portal.
- `message_dispatches`: exactly one dispatch per client message (the message id is the
  key), with its mode, state, lease and outcome.

Revision ID: 0015_clients
Revises: 0014_plan_bindings
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015_clients"
down_revision: str | None = "0014_plan_bindings"
branch_labels: str | None = None
depends_on: str | None = None

ACCESS = sa.table("access_map", sa.column("role", sa.String), sa.column("capability", sa.String))
CLIENT = ("conversations.participate", "steps.confirm", "org.grantable")


def upgrade() -> None:
    op.execute("DELETE FROM access_map WHERE role = 'client'")
    op.bulk_insert(ACCESS, [{"role": "client", "capability": c} for c in CLIENT])
    with op.batch_alter_table("orgs") as batch:
        batch.add_column(
            sa.Column(
                "clients_share_conversations",
                sa.Boolean(),
                nullable=False,
                server_default=sa.false(),
            )
        )
        batch.add_column(sa.Column("client_confirm_risks", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("reply_auto_send", sa.JSON(), nullable=True))
    with op.batch_alter_table("conversations") as batch:
        batch.add_column(sa.Column("created_by", sa.Uuid(), nullable=True))
    op.create_table(
        "conversation_participants",
        sa.Column("conversation_id", sa.Uuid(), nullable=False),
        sa.Column("user_id", sa.Uuid(), nullable=False),
        sa.Column("added_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name="fk_conversation_participants_conversation_id_conversations",
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name="fk_conversation_participants_user_id_users",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("conversation_id", "user_id", name="pk_conversation_participants"),
    )
    op.create_index(
        "ix_conversation_participants_user_id", "conversation_participants", ["user_id"]
    )
    _messages_and_dispatches()


def _messages_and_dispatches() -> None:
    with op.batch_alter_table("messages") as batch:
        batch.add_column(sa.Column("author_user_id", sa.Uuid(), nullable=True))
        batch.add_column(
            sa.Column("internal", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch.add_column(sa.Column("meta", sa.JSON(), nullable=True))
    op.create_table(
        "message_dispatches",
        sa.Column("message_id", sa.Integer(), nullable=False),
        sa.Column("org_id", sa.Uuid(), nullable=False),
        sa.Column("conversation_id", sa.Uuid(), nullable=False),
        sa.Column("mode", sa.String(20), nullable=True),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("claimed_by", sa.String(200), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("agent", sa.String(253), nullable=True),
        sa.Column("task", sa.String(253), nullable=True),
        sa.Column("reply_id", sa.Uuid(), nullable=True),
        sa.Column("error", sa.String(2000), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["message_id"],
            ["messages.id"],
            name="fk_message_dispatches_message_id_messages",
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["org_id"], ["orgs.id"], name="fk_message_dispatches_org_id_orgs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("message_id", name="pk_message_dispatches"),
    )
    op.create_index("ix_message_dispatches_state", "message_dispatches", ["state"])


def downgrade() -> None:
    op.drop_index("ix_message_dispatches_state", table_name="message_dispatches")
    op.drop_table("message_dispatches")
    with op.batch_alter_table("messages") as batch:
        batch.drop_column("meta")
        batch.drop_column("internal")
        batch.drop_column("author_user_id")
    op.drop_index("ix_conversation_participants_user_id", table_name="conversation_participants")
    op.drop_table("conversation_participants")
    with op.batch_alter_table("conversations") as batch:
        batch.drop_column("created_by")
    with op.batch_alter_table("orgs") as batch:
        batch.drop_column("reply_auto_send")
        batch.drop_column("client_confirm_risks")
        batch.drop_column("clients_share_conversations")
    op.execute("DELETE FROM access_map WHERE role = 'client'")
