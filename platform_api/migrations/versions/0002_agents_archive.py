"""Agent-facing tables and the task archive: archived_tasks, tool_calls (the tool proxy's
idempotency records), agent_events (deduplicated signed events), conversations and
messages, knowledge_documents.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None

TS = sa.DateTime(timezone=True)


def _org_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["org_id"], ["orgs.id"], name=f"fk_{table}_org_id_orgs", ondelete="CASCADE"
    )


def _create_archived_tasks() -> None:
    op.create_table(
        "archived_tasks",
        sa.Column("uid", sa.String(64), nullable=False),
        sa.Column("org_id", sa.Uuid(), nullable=False),
        sa.Column("namespace", sa.String(63), nullable=False),
        sa.Column("name", sa.String(253), nullable=False),
        sa.Column("phase", sa.String(30), nullable=False),
        sa.Column("requester", sa.String(200), nullable=False),
        sa.Column("description", sa.String(4000), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("status", sa.JSON(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("archived_at", TS, nullable=False),
        _org_fk("archived_tasks"),
        sa.PrimaryKeyConstraint("uid", name="pk_archived_tasks"),
    )
    op.create_index("ix_archived_tasks_org_id", "archived_tasks", ["org_id"])


def _create_tool_calls() -> None:
    op.create_table(
        "tool_calls",
        sa.Column("org_id", sa.Uuid(), nullable=False),
        sa.Column("idempotency_key", sa.String(200), nullable=False),
        sa.Column("agent_id", sa.String(300), nullable=False),
        sa.Column("tool", sa.String(100), nullable=False),
        sa.Column("action", sa.String(100), nullable=False),
        sa.Column("task", sa.String(253), nullable=True),
        sa.Column("step", sa.String(100), nullable=True),
        sa.Column("request_hash", sa.String(64), nullable=False),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("finished_at", TS, nullable=True),
        _org_fk("tool_calls"),
        sa.PrimaryKeyConstraint("org_id", "idempotency_key", name="pk_tool_calls"),
    )


def _create_agent_events() -> None:
    op.create_table(
        "agent_events",
        sa.Column("org_id", sa.Uuid(), nullable=False),
        sa.Column("idempotency_key", sa.String(200), nullable=False),
        sa.Column("agent_id", sa.String(300), nullable=False),
        sa.Column("event_type", sa.String(50), nullable=False),
        sa.Column("task_id", sa.String(253), nullable=True),
        sa.Column("step_id", sa.String(100), nullable=True),
        sa.Column("occurred_at", TS, nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("received_at", TS, nullable=False),
        _org_fk("agent_events"),
        sa.PrimaryKeyConstraint("org_id", "idempotency_key", name="pk_agent_events"),
    )
    op.create_index("ix_agent_events_event_type", "agent_events", ["event_type"])


def _create_conversations() -> None:
    op.create_table(
        "conversations",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("org_id", sa.Uuid(), nullable=False),
        sa.Column("subject", sa.String(300), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        _org_fk("conversations"),
        sa.PrimaryKeyConstraint("id", name="pk_conversations"),
    )
    op.create_index("ix_conversations_org_id", "conversations", ["org_id"])


def _create_messages() -> None:
    op.create_table(
        "messages",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("conversation_id", sa.Uuid(), nullable=False),
        sa.Column("role", sa.String(20), nullable=False),
        sa.Column("author", sa.String(200), nullable=False),
        sa.Column("content", sa.String(20000), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name="fk_messages_conversation_id_conversations",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_messages"),
    )
    op.create_index("ix_messages_conversation_id", "messages", ["conversation_id"])


def _create_knowledge_documents() -> None:
    op.create_table(
        "knowledge_documents",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("org_id", sa.Uuid(), nullable=False),
        sa.Column("title", sa.String(300), nullable=False),
        sa.Column("content", sa.String(100000), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        _org_fk("knowledge_documents"),
        sa.PrimaryKeyConstraint("id", name="pk_knowledge_documents"),
    )
    op.create_index("ix_knowledge_documents_org_id", "knowledge_documents", ["org_id"])


def upgrade() -> None:
    _create_archived_tasks()
    _create_tool_calls()
    _create_agent_events()
    _create_conversations()
    _create_messages()
    _create_knowledge_documents()


def downgrade() -> None:
    for table in (
        "knowledge_documents",
        "messages",
        "conversations",
        "agent_events",
        "tool_calls",
        "archived_tasks",
    ):
        op.drop_table(table)
