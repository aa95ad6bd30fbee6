"""`audit-verify` and `audit-checkpoint`: check the audit log against itself and against the
signed checkpoints kept outside the database; sign new checkpoints of intact chains.

`humanwork-platform audit-verify` (or `python -m platform_api.audit verify`) reports every
altered, removed or moved row, every head that does not match its chain, and, with
`HUMANWORK_AUDIT_CHECKPOINT_DIR`, every chain cut below its latest valid checkpoint and
every checkpoint that is forged or malformed. `humanwork-platform audit-checkpoint` does
the same checks, then signs the head of each intact chain that moved since its last
checkpoint; it never signs a chain with a problem (that would bless the cut). Exit
status: 0 when everything is intact, 1 when a problem was found, 2 when the checkpoint
settings are incomplete.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime

from humanwork_core.tokens import KeySet
from platform_api.db import make_engine, make_sessionmaker
from platform_api.floor.audit.chain import ChainRow, Problem, verify_chain
from platform_api.floor.audit.checkpoints import (
    Checkpoint,
    check_against_checkpoints,
    load_signing_key,
    sign_checkpoint,
    verification_keys,
)
from platform_api.floor.audit.repository import AuditRepository
from platform_api.floor.audit.store import FileCheckpointStore
from platform_api.settings import Settings

Chains = dict[str, tuple[list[ChainRow], tuple[int, str] | None]]


class ConfigurationError(Exception):
    """The checkpoint settings do not allow the requested command."""


async def read_chains(url: str) -> Chains:
    """Every chain's rows and head, read in one snapshot (REPEATABLE READ on PostgreSQL,
    so appends committing meanwhile do not look like a mismatched head)."""
    engine = make_engine(url)
    try:
        snapshot = engine
        if engine.dialect.name == "postgresql":
            snapshot = engine.execution_options(isolation_level="REPEATABLE READ")
        async with make_sessionmaker(snapshot)() as session, session.begin():
            return await AuditRepository(session).chains()
    finally:
        await engine.dispose()


def chain_problems(chains: Chains) -> list[Problem]:
    problems: list[Problem] = []
    for chain, (rows, head) in sorted(chains.items()):
        problems.extend(verify_chain(chain, rows, head))
    return problems


async def verify_database(url: str) -> list[Problem]:
    """Every hash-chain problem of the database at `url` (no checkpoints)."""
    return chain_problems(await read_chains(url))


@dataclass
class Report:
    """What one audit found."""

    problems: list[Problem] = field(default_factory=list)
    latest: dict[str, Checkpoint] = field(default_factory=dict)
    unanchored: list[str] = field(default_factory=list)
    checkpoints: bool = False


def _keys(settings: Settings) -> KeySet:
    signing = settings.audit_checkpoint_key_file
    keys = verification_keys(
        load_signing_key(signing) if signing else None, settings.audit_checkpoint_verify_keys_file
    )
    if not len(keys):
        raise ConfigurationError(
            "HUMANWORK_AUDIT_CHECKPOINT_DIR is set but no key verifies checkpoints: set "
            "HUMANWORK_AUDIT_CHECKPOINT_KEY_FILE or HUMANWORK_AUDIT_CHECKPOINT_VERIFY_KEYS_FILE"
        )
    return keys


def audit(settings: Settings, chains: Chains) -> Report:
    """The chains checked against themselves and, when configured, their checkpoints."""
    report = Report(problems=chain_problems(chains))
    if settings.audit_checkpoint_dir is None:
        return report
    keys = _keys(settings)
    store = FileCheckpointStore(settings.audit_checkpoint_dir)
    try:
        stored = store.read_all()
    except FileNotFoundError as exc:
        raise ConfigurationError(str(exc)) from None
    rows = {chain: chain_rows for chain, (chain_rows, _) in chains.items()}
    problems, report.latest = check_against_checkpoints(rows, stored, keys)
    report.problems.extend(problems)
    report.unanchored = sorted(c for c, (r, _) in chains.items() if r and c not in report.latest)
    report.checkpoints = True
    return report


def _print(report: Report) -> int:
    for problem in report.problems:
        print(problem, file=sys.stderr)
    if not report.checkpoints:
        print(
            "audit log: warning: no HUMANWORK_AUDIT_CHECKPOINT_DIR, so rows cut from the end "
            "of a chain together with its head cannot be detected",
            file=sys.stderr,
        )
    for chain in report.unanchored:
        print(f"{chain}: no checkpoint yet (its rows are not anchored)")
    if report.problems:
        print(f"audit log: {len(report.problems)} problem(s)", file=sys.stderr)
        return 1
    anchored = f", {len(report.latest)} matching their checkpoint" if report.checkpoints else ""
    print(f"audit log: every chain intact{anchored}")
    return 0


def run_verify(settings: Settings, url: str | None = None) -> int:
    """`audit-verify`: check and print; the process exit status."""
    try:
        report = audit(settings, asyncio.run(read_chains(url or settings.database_url)))
    except ConfigurationError as exc:
        print(f"audit-verify: {exc}", file=sys.stderr)
        return 2
    return _print(report)


def sign_intact(settings: Settings, chains: Chains, report: Report) -> int:
    """Sign the head of every intact chain that moved since its latest checkpoint."""
    if settings.audit_checkpoint_key_file is None:
        raise ConfigurationError("HUMANWORK_AUDIT_CHECKPOINT_KEY_FILE is not set")
    assert settings.audit_checkpoint_dir is not None
    key = load_signing_key(settings.audit_checkpoint_key_file)
    store = FileCheckpointStore(settings.audit_checkpoint_dir)
    refused, now, written = {p.chain for p in report.problems}, datetime.now(UTC), 0
    for chain, (_, head) in sorted(chains.items()):
        last = report.latest.get(chain)
        if chain in refused or head is None or head[0] == 0:
            continue
        if last is not None and (last.seq, last.hash) == head:
            continue
        checkpoint = sign_checkpoint(key, chain=chain, seq=head[0], head=head[1], at=now)
        written += store.put(checkpoint)
        store.prune(chain, settings.audit_checkpoint_keep)
    return written


def run_checkpoint(settings: Settings, url: str | None = None) -> int:
    """`audit-checkpoint`: verify, then sign the intact chains; the exit status."""
    try:
        if settings.audit_checkpoint_dir is None:
            raise ConfigurationError("HUMANWORK_AUDIT_CHECKPOINT_DIR is not set")
        settings.audit_checkpoint_dir.mkdir(parents=True, exist_ok=True)
        chains = asyncio.run(read_chains(url or settings.database_url))
        report = audit(settings, chains)
        written = sign_intact(settings, chains, report)
    except ConfigurationError as exc:
        print(f"audit-checkpoint: {exc}", file=sys.stderr)
        return 2
    refused = sorted({p.chain for p in report.problems})
    report.unanchored = []  # anchored just now, unless refused
    status = _print(report)
    print(f"audit checkpoints: {written} signed" + (f", refused for {refused}" if refused else ""))
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m platform_api.audit")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in (
        ("verify", "verify every hash chain and its checkpoints"),
        ("checkpoint", "verify, then sign a checkpoint of every intact chain"),
    ):
        command = sub.add_parser(name, help=text)
        command.add_argument("--database-url", default=None, help="default: HUMANWORK_DATABASE_URL")
    args = parser.parse_args(argv)
    run = run_verify if args.command == "verify" else run_checkpoint
    return run(Settings(), args.database_url)
