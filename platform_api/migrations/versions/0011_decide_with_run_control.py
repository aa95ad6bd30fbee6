"""One capability for every way of deciding: every role that held
`tasks.decide` holds `run.control` instead (seed 001: resume requires `run.control`), so
whoever could decide before still can, on every path, and `tasks.decide`, which no
endpoint checks any more, leaves the access map.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision: str | None = "0010"
branch_labels: str | None = None
depends_on: str | None = None

ACCESS = sa.table("access_map", sa.column("role", sa.String), sa.column("capability", sa.String))


def _roles_with(capability: str) -> set[str]:
    rows = op.get_bind().execute(sa.select(ACCESS.c.role).where(ACCESS.c.capability == capability))
    return {row[0] for row in rows}


def upgrade() -> None:
    missing = _roles_with("tasks.decide") - _roles_with("run.control")
    if missing:
        op.bulk_insert(ACCESS, [{"role": r, "capability": "run.control"} for r in sorted(missing)])
    op.execute("DELETE FROM access_map WHERE capability = 'tasks.decide'")


def downgrade() -> None:
    roles = _roles_with("run.control")
    if roles:
        op.bulk_insert(ACCESS, [{"role": r, "capability": "tasks.decide"} for r in sorted(roles)])
