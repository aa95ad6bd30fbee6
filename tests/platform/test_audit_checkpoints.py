"""Issue 12 item 9, from the attacker's side: the audit log cannot be cut.

The platform runs as the app role `humanwork_app` on a database whose schema the role
`humanwork_owner` owns (as in production). The attacker holds the owner's rights: it
switches the append-only triggers off, deletes an org's last rows and moves (or deletes)
the chain head with them, so the hash chain alone is consistent again. The signed
checkpoints, kept outside the database with a key no database role holds, still show the
cut; `humanwork-platform audit-verify` reports it and exits non-zero. A tampered
checkpoint is reported too. The app role itself cannot change, delete or truncate the log.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from humanwork_core.tokens import SigningKey, generate_signing_key, jwks
from humanwork_dev.postgres import APP_ROLE, OWNER_ROLE, PostgresServer
from platform_api.audit.cli import verify_database
from platform_api.db import migrate
from platform_api.floor.audit.checkpoints import sign_checkpoint
from platform_api.settings import Settings
from tests.fixtures.database import as_role
from tests.platform.conftest import TwoOrgs, make_settings


@pytest.fixture
def app_url(database_url: str) -> str:
    return as_role(database_url, APP_ROLE)


@pytest.fixture
def owner_url(database_url: str) -> str:
    return as_role(database_url, OWNER_ROLE)


@pytest.fixture
def settings(app_url: str) -> Settings:
    """The platform under test connects as the app role, not as the owner."""
    return make_settings(app_url, migrate_on_startup=False)


@dataclass
class Audit:
    """The audit commands as an operator runs them, on the test's database."""

    env: dict[str, str]
    directory: Path
    key: SigningKey

    def run(self, command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "platform_api.main", command],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    async def __call__(self, command: str) -> subprocess.CompletedProcess[str]:
        return await asyncio.to_thread(self.run, command)

    def files(self, chain: str) -> list[Path]:
        return sorted((self.directory / chain).glob("*.json"))


@pytest.fixture
def audit(app_url: str, tmp_path: Path) -> Audit:
    signing = generate_signing_key()
    key = tmp_path / "checkpoint-key.pem"
    key.write_bytes(signing.to_pem())
    directory = tmp_path / "checkpoints"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUMANWORK_")}
    env |= {
        "HUMANWORK_DATABASE_URL": app_url,
        "HUMANWORK_AUDIT_CHECKPOINT_DIR": str(directory),
        "HUMANWORK_AUDIT_CHECKPOINT_KEY_FILE": str(key),
    }
    return Audit(env, directory, signing)


async def _toggle(client: httpx.AsyncClient, orgs: TwoOrgs, times: int, start: int = 0) -> None:
    for i in range(start, start + times):
        r = await client.put(
            f"/orgs/{orgs.org_a}/tool-permissions/{('shopify', 'amazon')[i % 2]}",
            json={"enabled": i % 2 == 0},
            headers=orgs.admin_a.headers,
        )
        assert r.status_code == 200, r.text


@asynccontextmanager
async def as_owner(owner_url: str) -> AsyncIterator[AsyncConnection]:
    """A transaction of the tables' owner with the append-only triggers off (the owner may)."""
    engine = create_async_engine(owner_url)
    try:
        async with engine.begin() as conn:
            await conn.execute(text("ALTER TABLE audit_log DISABLE TRIGGER USER"))
            yield conn
            await conn.execute(text("ALTER TABLE audit_log ENABLE TRIGGER USER"))
    finally:
        await engine.dispose()


async def _last_seq(conn: AsyncConnection, chain: str) -> int:
    seq: int = (
        await conn.execute(text("SELECT max(seq) FROM audit_log WHERE chain = :c"), {"c": chain})
    ).scalar_one()
    return seq


async def cut_tail(owner_url: str, chain: str, rows: int) -> tuple[int, int]:
    """Delete the last `rows` rows of `chain` and point its head at the new last row, so the
    chain is consistent again; (old last seq, new last seq)."""
    async with as_owner(owner_url) as conn:
        last = await _last_seq(conn, chain)
        keep = last - rows
        await conn.execute(
            text("DELETE FROM audit_log WHERE chain = :c AND seq > :k"), {"c": chain, "k": keep}
        )
        head = (
            await conn.execute(
                text("SELECT hash FROM audit_log WHERE chain = :c AND seq = :k"),
                {"c": chain, "k": keep},
            )
        ).scalar_one()
        await conn.execute(
            text("UPDATE audit_chain_heads SET seq = :k, hash = :h WHERE chain = :c"),
            {"c": chain, "k": keep, "h": head},
        )
    return last, keep


async def test_an_intact_log_and_its_fresh_checkpoint_verify_clean(
    client: httpx.AsyncClient, two_orgs: TwoOrgs, audit: Audit
) -> None:
    """Positive control: the app (as the app role) appends, checkpoints are signed, every
    chain matches; rows appended after a checkpoint are fine and get the next one."""
    await _toggle(client, two_orgs, 3)
    signed = await audit("audit-checkpoint")
    assert signed.returncode == 0, signed.stderr
    assert len(audit.files(two_orgs.org_a)) == len(audit.files(two_orgs.org_b)) == 1
    ok = await audit("audit-verify")
    assert ok.returncode == 0, ok.stderr
    assert "every chain intact" in ok.stdout and "matching their checkpoint" in ok.stdout
    await _toggle(client, two_orgs, 2, start=3)
    later = await audit("audit-verify")
    assert later.returncode == 0, later.stderr
    again = await audit("audit-checkpoint")
    assert again.returncode == 0 and "1 signed" in again.stdout, again.stdout
    assert len(audit.files(two_orgs.org_a)) == 2 and len(audit.files(two_orgs.org_b)) == 1


async def test_a_tail_cut_together_with_its_head_is_reported(
    client: httpx.AsyncClient, two_orgs: TwoOrgs, audit: Audit, app_url: str, owner_url: str
) -> None:
    await _toggle(client, two_orgs, 4)
    assert (await audit("audit-checkpoint")).returncode == 0
    before = audit.files(two_orgs.org_a)
    last, keep = await cut_tail(owner_url, two_orgs.org_a, 3)
    # the premise: the hash chain alone no longer sees anything
    assert await verify_database(app_url) == []
    bad = await audit("audit-verify")
    assert bad.returncode == 1, bad.stdout
    assert f"{two_orgs.org_a} #{last}: truncated: the chain ends at seq {keep}" in bad.stderr
    assert two_orgs.org_b not in bad.stderr
    # and the next checkpoint refuses to bless the cut chain
    refused = await audit("audit-checkpoint")
    assert refused.returncode == 1 and "truncated" in refused.stderr
    assert audit.files(two_orgs.org_a) == before


async def test_a_whole_chain_deleted_with_its_head_is_reported(
    client: httpx.AsyncClient, two_orgs: TwoOrgs, audit: Audit, app_url: str, owner_url: str
) -> None:
    await _toggle(client, two_orgs, 1)
    assert (await audit("audit-checkpoint")).returncode == 0
    chain = two_orgs.org_b
    async with as_owner(owner_url) as conn:
        last = await _last_seq(conn, chain)
        await conn.execute(text("DELETE FROM audit_log WHERE chain = :c"), {"c": chain})
        await conn.execute(text("DELETE FROM audit_chain_heads WHERE chain = :c"), {"c": chain})
    assert await verify_database(app_url) == []
    bad = await audit("audit-verify")
    assert bad.returncode == 1
    assert f"{chain} #{last}: truncated: the chain has no rows left" in bad.stderr


async def test_a_chain_cut_and_written_again_is_reported(
    client: httpx.AsyncClient, two_orgs: TwoOrgs, audit: Audit, app_url: str, owner_url: str
) -> None:
    """Cut, then let the app append past the checkpointed length: the row the checkpoint
    names now has another hash."""
    await _toggle(client, two_orgs, 3)
    assert (await audit("audit-checkpoint")).returncode == 0
    last, _ = await cut_tail(owner_url, two_orgs.org_a, 2)
    await _toggle(client, two_orgs, 4, start=10)
    assert await verify_database(app_url) == []
    bad = await audit("audit-verify")
    assert bad.returncode == 1
    assert f"{two_orgs.org_a} #{last}: checkpoint_mismatch" in bad.stderr


async def test_a_tampered_checkpoint_is_reported(
    client: httpx.AsyncClient, two_orgs: TwoOrgs, audit: Audit
) -> None:
    await _toggle(client, two_orgs, 3)
    assert (await audit("audit-checkpoint")).returncode == 0
    (path,) = audit.files(two_orgs.org_a)
    genuine = path.read_bytes()
    doc = json.loads(genuine)
    # an edited checkpoint (a shorter chain, to cover a cut) keeps a signature that no
    # longer matches
    path.write_text(json.dumps({**doc, "seq": doc["seq"] - 2}))
    edited = await audit("audit-verify")
    assert edited.returncode == 1
    assert f"{two_orgs.org_a} #0: checkpoint_forged:" in edited.stderr
    assert "the signature does not match" in edited.stderr
    # one signed with the attacker's own key
    path.write_bytes(genuine)
    forged = sign_checkpoint(
        generate_signing_key(),
        chain=two_orgs.org_a,
        seq=doc["seq"] + 5,
        head="f" * 64,
        at=datetime.now(UTC),
    )
    (path.parent / f"{forged.seq:012d}-{'f' * 16}.json").write_bytes(forged.encode())
    foreign = await audit("audit-verify")
    assert foreign.returncode == 1
    assert "checkpoint_forged" in foreign.stderr and "unknown key" in foreign.stderr
    assert "truncated" not in foreign.stderr  # the genuine checkpoint still matches
    (path.parent / "000000000001-0000000000000000.json").write_text("not a checkpoint")
    broken = await audit("audit-verify")
    assert broken.returncode == 1 and "checkpoint_malformed" in broken.stderr


async def test_verify_without_a_verification_key_is_a_configuration_error(
    client: httpx.AsyncClient, two_orgs: TwoOrgs, audit: Audit
) -> None:
    assert (await audit("audit-checkpoint")).returncode == 0
    del audit.env["HUMANWORK_AUDIT_CHECKPOINT_KEY_FILE"]
    done = await audit("audit-verify")
    assert done.returncode == 2 and "no key verifies checkpoints" in done.stderr


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE audit_log SET actor = 'x'",
        "DELETE FROM audit_log",
        "TRUNCATE audit_log",
        "ALTER TABLE audit_log DISABLE TRIGGER USER",
        "DROP TABLE audit_log",
        "DELETE FROM audit_chain_heads",
        "TRUNCATE audit_chain_heads",
    ],
)
async def test_the_app_role_cannot_change_or_cut_the_audit_log(
    client: httpx.AsyncClient, two_orgs: TwoOrgs, app_url: str, statement: str
) -> None:
    """The app role's own statements are refused by PostgreSQL's privileges (not only by
    the triggers, which the owner can switch off)."""
    await _toggle(client, two_orgs, 1)  # the app, as this role, appends fine
    engine = create_async_engine(app_url)
    try:
        with pytest.raises(DBAPIError) as refused:
            async with engine.begin() as conn:
                await conn.execute(text(statement))
        assert getattr(refused.value.orig, "sqlstate", None) == "42501", refused.value
        async with engine.connect() as conn:
            owner = (
                await conn.execute(
                    text("SELECT tableowner FROM pg_tables WHERE tablename = 'audit_log'")
                )
            ).scalar_one()
            count = (await conn.execute(text("SELECT count(*) FROM audit_log"))).scalar_one()
        assert owner == OWNER_ROLE and count > 1
    finally:
        await engine.dispose()


async def test_migrate_runs_as_the_owner_and_grants_the_app_role(
    postgres: PostgresServer,
) -> None:
    """`humanwork-platform migrate` with both URLs, on an empty database, as the production
    init container runs it."""
    name = f"roles_{uuid.uuid4().hex}"
    await postgres.create_database(name, owner=OWNER_ROLE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUMANWORK_")}
    env |= {
        "HUMANWORK_DATABASE_URL": postgres.url(name, role=APP_ROLE),
        "HUMANWORK_DATABASE_OWNER_URL": postgres.url(name, role=OWNER_ROLE),
    }
    try:
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "platform_api.main", "migrate"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        engine = create_async_engine(postgres.url(name))
        try:
            async with engine.connect() as conn:
                rows = await conn.execute(
                    text(
                        "SELECT t, p, has_table_privilege(:r, t, p) FROM "
                        "unnest(CAST(:t AS text[])) t, unnest(CAST(:p AS text[])) p"
                    ),
                    {
                        "r": APP_ROLE,
                        "t": ["audit_log", "audit_chain_heads", "orgs"],
                        "p": ["SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE"],
                    },
                )
                allowed = {(t, p) for t, p, ok in rows if ok}
                owners = set(
                    (
                        await conn.execute(
                            text(
                                "SELECT DISTINCT tableowner FROM pg_tables "
                                "WHERE schemaname = 'public'"
                            )
                        )
                    ).scalars()
                )
        finally:
            await engine.dispose()
    finally:
        await postgres.drop_database(name)
    assert owners == {OWNER_ROLE}
    assert {p for t, p in allowed if t == "audit_log"} == {"SELECT", "INSERT"}
    assert {p for t, p in allowed if t == "audit_chain_heads"} == {"SELECT", "INSERT", "UPDATE"}
    assert {p for t, p in allowed if t == "orgs"} == {"SELECT", "INSERT", "UPDATE", "DELETE"}


async def test_checkpoints_of_a_retired_key_verify_through_the_published_key_set(
    client: httpx.AsyncClient, two_orgs: TwoOrgs, audit: Audit, tmp_path: Path
) -> None:
    """Key rotation: the old key's public half, as a JWK set, keeps its checkpoints valid;
    without it they are refused. A machine with the JWK set alone can verify."""
    await _toggle(client, two_orgs, 2)
    assert (await audit("audit-checkpoint")).returncode == 0
    old = audit.key
    retired = tmp_path / "retired-keys.json"
    retired.write_text(json.dumps(jwks([old])))
    new_key = tmp_path / "new-key.pem"
    new = generate_signing_key()
    new_key.write_bytes(new.to_pem())
    audit.env["HUMANWORK_AUDIT_CHECKPOINT_KEY_FILE"] = str(new_key)
    audit.env["HUMANWORK_AUDIT_CHECKPOINT_VERIFY_KEYS_FILE"] = str(tmp_path / "absent.json")
    refused = await audit("audit-verify")
    assert refused.returncode == 1 and "unknown key" in refused.stderr
    audit.env["HUMANWORK_AUDIT_CHECKPOINT_VERIFY_KEYS_FILE"] = str(retired)
    assert (await audit("audit-verify")).returncode == 0
    await _toggle(client, two_orgs, 1, start=5)
    assert (await audit("audit-checkpoint")).returncode == 0  # now signed with the new key
    del audit.env["HUMANWORK_AUDIT_CHECKPOINT_KEY_FILE"]
    retired.write_text(json.dumps(jwks([old, new])))
    verify_only = await audit("audit-verify")
    assert verify_only.returncode == 0, verify_only.stderr


@pytest.mark.parametrize("privilege", ["SUPERUSER", f"IN ROLE {OWNER_ROLE}"])
async def test_migrate_refuses_an_app_role_that_could_undo_its_restrictions(
    postgres: PostgresServer, privilege: str
) -> None:
    """An app role that is a superuser or a member of the owner holds the owner's rights:
    the migration fails rather than pretend the audit log is protected."""
    suffix = uuid.uuid4().hex[:8]
    role, name = f"app_{suffix}", f"priv_{suffix}"
    admin = create_async_engine(postgres.url("postgres"))
    try:
        async with admin.begin() as conn:
            await conn.execute(text(f"CREATE ROLE {role} LOGIN {privilege}"))
        await postgres.create_database(name, owner=OWNER_ROLE)
        owner = create_async_engine(postgres.url(name, role=OWNER_ROLE))
        try:
            with pytest.raises(RuntimeError, match="could change or cut the audit log"):
                await migrate(owner, app_role=role)
        finally:
            await owner.dispose()
    finally:
        await postgres.drop_database(name)
        async with admin.begin() as conn:
            await conn.execute(text(f"DROP ROLE IF EXISTS {role}"))
        await admin.dispose()
