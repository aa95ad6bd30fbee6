"""The PostgreSQL privileges of the platform's application role (migration 0005).

The schema belongs to an owner role that only the migrations use; the app connects as
another role that may read and write what it serves, and may INSERT and SELECT the audit
log but never UPDATE, DELETE or TRUNCATE it (nor disable its append-only triggers, which
only the owner can). The chain heads it may update (each append moves the head), not
delete; a head it moved wrongly is caught by the chain check and the signed checkpoints.

`grant_statements` is idempotent: the migration runs it once and `db.migrate` runs it
again on every migration with an app role, so tables added later, or an app role named
after 0005 ran, get the same rules.
"""

from __future__ import annotations

import re

_ROLE = re.compile(r"[a-z_][a-z0-9_]{0,62}")
AUDIT_TABLES = ("audit_log", "audit_chain_heads")


def quoted_role(role: str) -> str:
    """`role` as a quoted identifier; ValueError unless it is a plain lower-case name."""
    if not _ROLE.fullmatch(role):
        raise ValueError(f"not a plain PostgreSQL role name: {role!r}")
    return f'"{role}"'


PUBLIC_REVOKES = [f"REVOKE ALL ON {table} FROM PUBLIC" for table in AUDIT_TABLES]


def grant_statements(role: str) -> list[str]:
    """What the app role `role` may do, as SQL run by the owner."""
    r = quoted_role(role)
    dml = "SELECT, INSERT, UPDATE, DELETE"
    return [
        *PUBLIC_REVOKES,
        f"GRANT USAGE ON SCHEMA public TO {r}",
        f"GRANT {dml} ON ALL TABLES IN SCHEMA public TO {r}",
        f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {r}",
        f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT {dml} ON TABLES TO {r}",
        f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO {r}",
        f"REVOKE UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER ON audit_log FROM {r}",
        f"REVOKE DELETE, TRUNCATE, REFERENCES, TRIGGER ON audit_chain_heads FROM {r}",
        f"REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON alembic_version FROM {r}",
    ]


def revoke_statements(role: str) -> list[str]:
    """Undo `grant_statements` (the migration's downgrade)."""
    r = quoted_role(role)
    return [
        f"ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE ALL ON TABLES FROM {r}",
        f"ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE ALL ON SEQUENCES FROM {r}",
        f"REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {r}",
        f"REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM {r}",
    ]
