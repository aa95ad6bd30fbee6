"""The service skeleton: settings from the environment, no import- or build-time side
effects, the console script, password hashing, migrations from an empty database."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, inspect, text

from humanwork_dev.postgres import PostgresServer
from platform_api.app import create_app
from platform_api.auth.passwords import hash_password, verify_password
from platform_api.db import SESSIONS, alembic_config, downgrade, make_engine, migrate
from platform_api.models import Base
from platform_api.settings import DEFAULT_DATABASE_URL, Settings

HEAD = ScriptDirectory.from_config(alembic_config()).get_current_head()
"""The newest migration (one head: the migrations form a single chain)."""

TABLES = {
    "orgs",
    "users",
    "memberships",
    "access_map",
    "audit_log",
    "audit_chain_heads",
    "tool_permissions",
    "integration_credentials",
    "archived_tasks",
    "tool_calls",
    "agent_events",
    "conversations",
    "messages",
    "knowledge_documents",
    "login_failures",
    "tool_call_counts",  # issue 15, item 10
    "reply_drafts",  # issue 14
    "corrections",  # issue 14
    # notify (issue 14, item 3)
    "webhooks",
    "notify_events",
    "webhook_deliveries",
    "plan_bindings",  # who asked an agent, bound before it is asked
    "conversation_participants",
    "message_dispatches",
    "mcp_servers",  # an org's MCP servers (0017)
    "mcp_tools",
    "alembic_version",
}


def test_settings_come_from_humanwork_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HUMANWORK_DATABASE_URL", "postgresql+asyncpg://u@h/db")
    monkeypatch.setenv("HUMANWORK_ADMIN_PASSWORD", "from-the-env")
    monkeypatch.setenv("HUMANWORK_ACCESS_MAP", '{"viewer": ["tasks.read", "audit.read"]}')
    monkeypatch.setenv("HUMANWORK_CREDENTIALS_KEYS", '{"k9": "c2VjcmV0"}')
    monkeypatch.setenv("HUMANWORK_OIDC_JWKS_URL", "https://idp/jwks")
    s = Settings()
    assert s.database_url == "postgresql+asyncpg://u@h/db"
    assert s.admin_password is not None
    assert s.admin_password.get_secret_value() == "from-the-env"
    assert "from-the-env" not in repr(s) and "c2VjcmV0" not in repr(s)
    assert s.access_map == {"viewer": ["tasks.read", "audit.read"]}
    assert s.oidc_jwks_url == "https://idp/jwks" and s.port == 8000


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("HUMANWORK_"):
            monkeypatch.delenv(name)
    s = Settings()
    assert s.database_url == DEFAULT_DATABASE_URL
    assert s.database_url.startswith("sqlite+aiosqlite:///")
    assert s.port == 8000 and s.admin_password is None


def test_building_the_app_has_no_side_effects(tmp_path: Path) -> None:
    db_file = tmp_path / "never.db"
    app = create_app(Settings(database_url=f"sqlite+aiosqlite:///{db_file}"))
    assert app.title and not hasattr(app.state, SESSIONS.name)
    assert not db_file.exists()


def test_importing_has_no_side_effects(tmp_path: Path) -> None:
    code = (
        "import platform_api.app, platform_api.main, platform_api.audit.cli, "
        "platform_api.models, platform_api.db"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert list(tmp_path.iterdir()) == []


def test_console_script_help() -> None:
    exe = Path(sys.executable).parent / "humanwork-platform"
    done = subprocess.run([str(exe), "--help"], capture_output=True, text=True, check=False)
    assert done.returncode == 0
    for command in ("serve", "migrate", "audit-verify", "rotate-credentials"):
        assert command in done.stdout


def test_password_hash_format_and_verification() -> None:
    encoded = hash_password("correct horse battery")
    scheme, params, salt, key = encoded.split("$")
    assert scheme == "scrypt" and params == "n=32768,r=8,p=1"
    assert salt and key and "correct horse" not in encoded
    assert hash_password("correct horse battery") != encoded  # random salt
    assert verify_password(encoded, "correct horse battery")
    assert not verify_password(encoded, "correct horse batterY")
    assert not verify_password(None, "anything")
    assert not verify_password("plain-text-password", "plain-text-password")
    tampered = encoded[:-4] + ("AAAA" if not encoded.endswith("AAAA") else "BBBB")
    assert not verify_password(tampered, "correct horse battery")


def _schema_diff(conn: Connection) -> list[object]:
    context = MigrationContext.configure(conn, opts={"compare_type": True})
    return list(compare_metadata(context, Base.metadata))


def _tables(conn: Connection) -> set[str]:
    return set(inspect(conn).get_table_names())


async def test_migrations_run_up_from_empty_postgres(postgres: PostgresServer) -> None:
    name = f"empty_{uuid.uuid4().hex}"
    url = await postgres.create_database(name)
    engine = make_engine(url)
    try:
        async with engine.connect() as conn:
            assert await conn.run_sync(_tables) == set()
        await migrate(engine)
        await migrate(engine)  # idempotent
        async with engine.connect() as conn:
            assert await conn.run_sync(_tables) == TABLES
            assert await conn.run_sync(_schema_diff) == []
            version = (await conn.execute(text("SELECT version_num FROM alembic_version"))).scalar()
            grants = (await conn.execute(text("SELECT role, capability FROM access_map"))).all()
        assert version == HEAD
        by_role: dict[str, set[str]] = {}
        for role, cap in grants:
            by_role.setdefault(role, set()).add(cap)
        # 0013_admins: every role may be given by an org's admins (within its own)
        assert by_role["viewer"] == {"tasks.read", "org.grantable"}
        # 0007_rules: run.control instead of tasks.decide, for every role that held it
        assert by_role["expert"] == {"tasks.read", "run.control", "org.grantable"}
        assert by_role["operator"] == {"tasks.read", "run.control", "org.grantable"}
        assert not any("tasks.decide" in caps for caps in by_role.values())
        assert by_role["admin"] >= {
            "tools.manage",
            "agents.manage",
            "audit.read",
            "orgs.manage",
            "users.manage",
            "run.control",
        }
        # 0013_admins: the access map is the platform administrators', never a role's
        assert not any("access.manage" in caps for caps in by_role.values())
        await downgrade(engine, "base")
        await migrate(engine)
        async with engine.connect() as conn:
            assert await conn.run_sync(_tables) == TABLES
        await downgrade(engine, "base")
        async with engine.connect() as conn:
            assert await conn.run_sync(_tables) == {"alembic_version"}
    finally:
        await engine.dispose()
        await postgres.drop_database(name)


async def test_migrations_run_on_the_embedded_sqlite_default(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite+aiosqlite:///{tmp_path / 'platform.db'}")
    try:
        await migrate(engine)
        async with engine.connect() as conn:
            assert await conn.run_sync(_tables) == TABLES
            count = (await conn.execute(text("SELECT count(*) FROM access_map"))).scalar_one()
        assert count >= 10
    finally:
        await engine.dispose()


def test_migrate_and_rotate_commands(tmp_path: Path) -> None:
    exe = str(Path(sys.executable).parent / "humanwork-platform")
    url = f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}"
    env = {
        **os.environ,
        "HUMANWORK_DATABASE_URL": url,
        "HUMANWORK_CREDENTIALS_KEYS": '{"k1": "' + "A" * 43 + '="}',
    }
    migrated = subprocess.run(
        [exe, "migrate"], env=env, capture_output=True, text=True, check=False, timeout=120
    )
    assert migrated.returncode == 0, migrated.stderr
    assert (tmp_path / "cli.db").exists()
    rotated = subprocess.run(
        [exe, "rotate-credentials"], env=env, capture_output=True, text=True, check=False
    )
    assert rotated.returncode == 0, rotated.stderr
    assert "re-encrypted 0 credential(s)" in rotated.stdout
    verified = subprocess.run(
        [exe, "audit-verify"], env=env, capture_output=True, text=True, check=False
    )
    assert verified.returncode == 0 and "intact" in verified.stdout


def test_a_short_jwt_secret_is_refused_without_echoing_it() -> None:
    with pytest.raises(ValueError, match="jwt_secret") as refused:
        Settings(jwt_secret="too-short-secret-123")
    assert "too-short-secret-123" not in str(refused.value)


def test_missing_postgres_binaries_are_reported_with_the_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from humanwork_dev import postgres as harness

    monkeypatch.setattr(harness.glob, "glob", lambda pattern: [])
    with pytest.raises(harness.PostgresError, match="make postgres-binaries"):
        harness.find_bin_dir()


def test_install_script_is_idempotent_here() -> None:
    scripts = Path(__file__).resolve().parents[2] / "humanwork_dev" / "scripts"
    script = scripts / "install-postgres.sh"
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""  # binaries present: nothing to do, no apt-get


async def test_replicas_starting_together_migrate_one_after_the_other(
    postgres: PostgresServer,
) -> None:
    name = f"race_{uuid.uuid4().hex}"
    url = await postgres.create_database(name)
    engines = [make_engine(url) for _ in range(4)]
    try:
        await asyncio.gather(*(migrate(engine) for engine in engines))
        async with engines[0].connect() as conn:
            assert await conn.run_sync(_tables) == TABLES
            version = (await conn.execute(text("SELECT version_num FROM alembic_version"))).all()
        assert version == [(HEAD,)]
    finally:
        for engine in engines:
            await engine.dispose()
        await postgres.drop_database(name)


async def test_the_oidc_identity_migration_keeps_existing_users(postgres: PostgresServer) -> None:
    url = await postgres.create_database(f"oidc_{uuid.uuid4().hex}")
    engine = make_engine(url)
    try:
        await migrate(engine, "0002")
        async with engine.begin() as conn:
            await conn.execute(
                text(
                    "INSERT INTO users (id, username, password_hash, role, created_at) VALUES "
                    "(:id, 'carol', 'scrypt$x', 'expert', now())"
                ),
                {"id": uuid.uuid4()},
            )
        await migrate(engine)
        async with engine.connect() as conn:
            rows = (
                await conn.execute(
                    text("SELECT username, role, oidc_issuer, oidc_subject FROM users")
                )
            ).all()
        assert [tuple(r) for r in rows] == [("carol", "expert", None, None)]
    finally:
        await engine.dispose()
