"""The app role may append to the audit log but not change, delete or truncate it.

On PostgreSQL: nobody but the owner (the role migrations run as) has any privilege on
the audit tables by default (REVOKE ... FROM PUBLIC), and the app role, when
`db.migrate` is given one (the user of HUMANWORK_DATABASE_URL when
HUMANWORK_DATABASE_OWNER_URL is set), gets SELECT and INSERT on `audit_log`, no UPDATE,
DELETE or TRUNCATE (see `platform_api.privileges`). SQLite has no roles: the
embedded default keeps only its triggers (docs/security.md).

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

from alembic import context, op

from platform_api.privileges import PUBLIC_REVOKES, grant_statements, revoke_statements

revision = "0005"
down_revision: str | None = "0004"
branch_labels: str | None = None
depends_on: str | None = None


def _app_role() -> str | None:
    role = context.config.attributes.get("app_role")
    return str(role) if role else None


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    role = _app_role()
    for statement in grant_statements(role) if role else PUBLIC_REVOKES:
        op.execute(statement)


def downgrade() -> None:
    role = _app_role()
    if op.get_bind().dialect.name == "postgresql" and role:
        for statement in revoke_statements(role):
            op.execute(statement)
