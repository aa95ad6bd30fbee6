"""Notifications: `webhooks` (one per org, its secret sealed),
`notify_events` (each event once per org and stable event id; the live stream's log) and
`webhook_deliveries` (what to deliver, every attempt recorded).

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision: str | None = "0011"
branch_labels: str | None = None
depends_on: str | None = None

TS = sa.DateTime(timezone=True)


def _org_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["org_id"], ["orgs.id"], name=f"fk_{table}_org_id_orgs", ondelete="CASCADE"
    )


def _create_webhooks() -> None:
    op.create_table(
        "webhooks",
        sa.Column("org_id", sa.Uuid(), nullable=False),
        sa.Column("url", sa.String(2048), nullable=False),
        sa.Column("events", sa.JSON(), nullable=False),
        sa.Column("key_id", sa.String(100), nullable=True),
        sa.Column("nonce", sa.LargeBinary(), nullable=True),
        sa.Column("secret", sa.LargeBinary(), nullable=False),
        sa.Column("updated_by", sa.String(200), nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        _org_fk("webhooks"),
        sa.PrimaryKeyConstraint("org_id", name="pk_webhooks"),
    )


def _create_events() -> None:
    op.create_table(
        "notify_events",
        sa.Column("seq", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("org_id", sa.Uuid(), nullable=False),
        sa.Column("event_id", sa.String(300), nullable=False),
        sa.Column("event", sa.String(50), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        _org_fk("notify_events"),
        sa.PrimaryKeyConstraint("seq", name="pk_notify_events"),
        sa.UniqueConstraint("org_id", "event_id", name="uq_notify_events_org_id"),
    )
    op.create_index("ix_notify_events_org_id", "notify_events", ["org_id"])
    op.create_index("ix_notify_events_created_at", "notify_events", ["created_at"])


def _create_deliveries() -> None:
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("org_id", sa.Uuid(), nullable=False),
        sa.Column("event_id", sa.String(300), nullable=False),
        sa.Column("event", sa.String(50), nullable=False),
        sa.Column("body", sa.String(100000), nullable=False),
        sa.Column("url", sa.String(2048), nullable=False),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("attempt_count", sa.Integer(), nullable=False),
        sa.Column("attempts", sa.JSON(), nullable=False),
        sa.Column("next_attempt_at", TS, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("delivered_at", TS, nullable=True),
        _org_fk("webhook_deliveries"),
        sa.PrimaryKeyConstraint("id", name="pk_webhook_deliveries"),
        sa.UniqueConstraint("org_id", "event_id", name="uq_webhook_deliveries_org_id"),
    )
    for column in ("org_id", "state", "next_attempt_at"):
        op.create_index(f"ix_webhook_deliveries_{column}", "webhook_deliveries", [column])


def upgrade() -> None:
    _create_webhooks()
    _create_events()
    _create_deliveries()


def downgrade() -> None:
    op.drop_table("webhook_deliveries")
    op.drop_table("notify_events")
    op.drop_table("webhooks")
