"""Two levels of administration: platform administrators and a role per membership.

- `users.platform_admin`: platform-wide settings (the access map, creating orgs, platform
  administrators) need it; no membership grants it. Only the bootstrap user `admin` gets
  it here: every other user held `access.manage` through a role any org admin could give,
  so none of them is made a platform administrator by the upgrade (one is made with
  `PUT /users/{username}/platform-admin`).
- `memberships.role`: each user's role is copied onto each of its memberships, so nobody
  can do less or more in an org than before; from now on a request on an org is judged
  by the role in that org. `users.role` stays as the role the user was created with.
- `users.deactivated_at`: a deactivated user's tokens are refused.
- The access map: `access.manage` leaves every role (it is the platform administrator's,
  never a role's), and every role is marked `org.grantable` (org admins may give it to
  their members, within their own capabilities), as every role could be given before.

Revision ID: 0013_admins
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013_admins"
down_revision: str | None = "0012"
branch_labels: str | None = None
depends_on: str | None = None

ACCESS = sa.table("access_map", sa.column("role", sa.String), sa.column("capability", sa.String))
GRANTABLE = "org.grantable"


def _roles() -> set[str]:
    rows = op.get_bind().execute(sa.select(ACCESS.c.role).distinct())
    return {row[0] for row in rows}


def upgrade() -> None:
    op.add_column(
        "users",
        sa.Column("platform_admin", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.add_column("users", sa.Column("deactivated_at", sa.DateTime(timezone=True), nullable=True))
    op.execute("UPDATE users SET platform_admin = true WHERE username = 'admin'")
    op.add_column("memberships", sa.Column("role", sa.String(50), nullable=True))
    op.execute(
        "UPDATE memberships SET role = users.role FROM users WHERE users.id = memberships.user_id"
    )
    with op.batch_alter_table("memberships") as batch:  # SQLite rebuilds the table
        batch.alter_column("role", existing_type=sa.String(50), nullable=False)
    op.execute("DELETE FROM access_map WHERE capability = 'access.manage'")
    roles = _roles()
    op.execute(f"DELETE FROM access_map WHERE capability = '{GRANTABLE}'")
    if roles:
        op.bulk_insert(ACCESS, [{"role": r, "capability": GRANTABLE} for r in sorted(roles)])


def downgrade() -> None:
    op.execute(f"DELETE FROM access_map WHERE capability = '{GRANTABLE}'")
    op.execute(
        "INSERT INTO access_map (role, capability) SELECT DISTINCT role, 'access.manage' "
        "FROM access_map WHERE role = 'admin'"
    )
    with op.batch_alter_table("memberships") as batch:
        batch.drop_column("role")
    with op.batch_alter_table("users") as batch:
        batch.drop_column("deactivated_at")
        batch.drop_column("platform_admin")
