"""Migration 0013_admins: each user's former global role lands on each of its memberships
(nobody can do more or less in an org than before), only the bootstrap `admin` becomes a
platform administrator (an org's admin held `access.manage` through its role, which any
org admin could give: it does not keep it), `access.manage` leaves every role and every
role is marked `org.grantable`."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from sqlalchemy import text

from humanwork_dev.postgres import PostgresServer
from platform_api.db import make_engine, migrate

NOW = datetime(2026, 12, 1, tzinfo=UTC)
USERS = {"admin": "admin", "admin-a": "admin", "expert-a": "expert", "viewer-ab": "viewer"}


async def test_roles_move_onto_memberships_and_only_the_bootstrap_admin_is_platform_admin(
    postgres: PostgresServer,
) -> None:
    name = f"m0013_{uuid.uuid4().hex}"
    engine = make_engine(await postgres.create_database(name))
    orgs = {"a": uuid.uuid4(), "b": uuid.uuid4()}
    ids = {u: uuid.uuid4() for u in USERS}
    member = {"admin": "ab", "admin-a": "a", "expert-a": "a", "viewer-ab": "ab"}
    try:
        await migrate(engine, "0012")
        async with engine.begin() as conn:
            for slug, org in orgs.items():
                await conn.execute(
                    text(
                        "INSERT INTO orgs (id, slug, name, namespace, created_at) "
                        "VALUES (:id, :slug, :slug, :ns, :at)"
                    ),
                    {"id": org, "slug": slug, "ns": f"org-{slug}", "at": NOW},
                )
            for username, role in USERS.items():
                await conn.execute(
                    text(
                        "INSERT INTO users (id, username, role, created_at) "
                        "VALUES (:id, :u, :r, :at)"
                    ),
                    {"id": ids[username], "u": username, "r": role, "at": NOW},
                )
                for slug in member[username]:
                    await conn.execute(
                        text("INSERT INTO memberships (user_id, org_id) VALUES (:u, :o)"),
                        {"u": ids[username], "o": orgs[slug]},
                    )
        await migrate(engine)
        async with engine.connect() as conn:
            held = (
                await conn.execute(
                    text(
                        "SELECT u.username, o.slug, m.role FROM memberships m "
                        "JOIN users u ON u.id = m.user_id JOIN orgs o ON o.id = m.org_id"
                    )
                )
            ).all()
            admins = (
                await conn.execute(text("SELECT username FROM users WHERE platform_admin"))
            ).all()
            grants = (await conn.execute(text("SELECT role, capability FROM access_map"))).all()
        assert sorted(map(tuple, held)) == sorted(
            (u, slug, USERS[u]) for u in USERS for slug in member[u]
        )
        assert [a[0] for a in admins] == ["admin"]
        by_role: dict[str, set[str]] = {}
        for role, capability in grants:
            by_role.setdefault(role, set()).add(capability)
        assert all("access.manage" not in caps for caps in by_role.values())
        assert all("org.grantable" in caps for caps in by_role.values())
    finally:
        await engine.dispose()
        await postgres.drop_database(name)
