"""`python -m platform_api.backup backup|restore`: the platform database and the resources,
copied together and restored together.

`backup --out DIR` writes `DIR/database.dump` (PostgreSQL, `pg_dump` custom format) or
`DIR/database.sqlite` (SQLite's online backup), `DIR/resources.json` (every AgentInstance
and AgenticTask with its status, `backup.resources`) and `DIR/manifest.json` (when, what,
and each audit chain's head at that moment).

`restore --from DIR` (the platform stopped) replaces the database with the copy, checks
the audit log (each chain against itself, and against the signed checkpoints outside the
database when `HUMANWORK_AUDIT_CHECKPOINT_DIR` is set), re-applies the resources
(`backup.resources`: what exists is kept, a missing task comes back with every unfinished
approved step `OutcomeUnknown`), makes the proxy's ledger agree (`backup.ledger`), and
records the restore in the audit log (`platform.restored`, read by `/healthz` and the
metrics). A restore to a point older than the checkpoints is said in capitals, with what
is missing, and exits 3. Exit status: 0 restored and current, 1 a chain does not verify
against itself or a resource failed, 2 bad arguments or settings, 3 restored to an older
point than the checkpoints.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from humanwork_core import kube_credentials
from humanwork_core.kube_client import Kube
from humanwork_core.resources.names import TASKS
from platform_api.audit.cli import ConfigurationError, Report, audit, read_chains
from platform_api.backup import database, ledger, resources
from platform_api.backup.marker import RESTORED
from platform_api.db import make_engine, make_sessionmaker
from platform_api.floor.audit.service import record
from platform_api.settings import Settings

FORMAT = "humanwork.io/backup/v1"
BEHIND_KINDS = ("truncated", "checkpoint_mismatch")
EXIT_BEHIND = 3


FIELD_MANAGER = "humanwork-backup"
USER_AGENT = "humanwork-backup/0.1.0"


@contextlib.asynccontextmanager
async def _api(kubeconfig: str | None) -> AsyncIterator[Kube]:
    """The lean client, with the kubeconfig given, else the pod's ServiceAccount."""
    if kubeconfig:
        creds = kube_credentials.from_kubeconfig(Path(kubeconfig))
    else:
        creds = kube_credentials.in_cluster()
    kube = Kube.open(creds, field_manager=FIELD_MANAGER, user_agent=USER_AGENT, connections=4)
    try:
        yield kube
    finally:
        await kube.close()


async def _export(kubeconfig: str | None) -> dict[str, list[dict[str, Any]]]:
    async with _api(kubeconfig) as kube:
        return await resources.export(kube)


def _heads(url: str) -> dict[str, list[Any]]:
    chains = asyncio.run(read_chains(url))
    return {chain: list(head) for chain, (_, head) in sorted(chains.items()) if head}


def run_backup(args: argparse.Namespace, url: str) -> int:
    out = Path(args.out)
    if out.exists() and any(out.iterdir()):
        print(f"backup: {out} is not empty", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    backend = database.kind(url)
    file = "database.dump" if backend == "postgresql" else "database.sqlite"
    taken = datetime.now(UTC)
    counts: dict[str, int] = {}
    if not args.no_resources:
        # the resources first: the database copied after them knows as much or more of
        # each step (a ledger claim finished meanwhile), never less
        exported = asyncio.run(_export(args.kubeconfig))
        (out / "resources.json").write_text(json.dumps(exported, indent=1, sort_keys=True))
        counts = {kind: len(items) for kind, items in exported.items()}
    heads = _heads(url)
    database.dump(url, out / file, args.pg_bin)
    manifest = {
        "format": FORMAT,
        "taken_at": taken.isoformat(),
        "database": backend,
        "file": file,
        "audit_heads": heads,
        "resources": counts,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True))
    print(f"backup: {backend} database and {counts or 'no'} resources in {out}")
    return 0


def _behind(report: Report) -> dict[str, str]:
    return {p.chain: p.message for p in report.problems if p.kind in BEHIND_KINDS}


async def _apply(kubeconfig: str | None, backup: dict[str, Any], url: str) -> resources.Applied:
    """Re-apply the resources, then re-key the re-created tasks' rows and fill in the
    surviving tasks' (`backup.ledger`)."""
    async with _api(kubeconfig) as kube:
        applied = await resources.apply(kube, backup)
        live = (await resources.export(kube))[TASKS]
    engine = make_engine(url)
    try:
        async with make_sessionmaker(engine)() as session, session.begin():
            for task in live:
                key = f"{task['metadata']['namespace']}/{task['metadata']['name']}"
                if key in applied.uids:  # re-created: the live uid is the new one
                    await ledger.rekey(session, task, applied.uids[key][0])
                elif key in applied.kept[TASKS]:
                    await ledger.fill(session, task)
    finally:
        await engine.dispose()
    return applied


def _mark(url: str, details: dict[str, Any]) -> None:
    async def run() -> None:
        engine = make_engine(url)
        try:
            async with make_sessionmaker(engine)() as session, session.begin():
                await record(
                    session,
                    actor="platform-restore",
                    action=RESTORED,
                    target="platform:database",
                    outcome="failure" if details["behind"] else "success",
                    details=details,
                )
        finally:
            await engine.dispose()

    asyncio.run(run())


def _say(manifest: dict[str, Any], report: Report, applied: resources.Applied | None) -> None:
    self_problems = [p for p in report.problems if p.kind not in BEHIND_KINDS]
    for problem in self_problems:
        print(f"audit log: {problem}", file=sys.stderr)
    print(f"restored the backup taken at {manifest['taken_at']}")
    if not self_problems:
        print("audit log: every chain verifies against itself")
    behind = _behind(report)
    if behind:
        print(
            "RESTORED TO AN OLDER POINT: the audit log is behind its signed checkpoints; "
            "what was recorded after the backup is gone:"
        )
        for chain, message in sorted(behind.items()):
            print(f"  {chain}: {message}")
    elif report.checkpoints:
        print(f"audit log: {len(report.latest)} chain(s) match their latest checkpoint")
    else:
        print(
            "audit log: no HUMANWORK_AUDIT_CHECKPOINT_DIR: whether this point is the latest "
            "cannot be told"
        )
    if applied is not None:
        for kind in resources.KINDS:
            print(
                f"{kind}: {len(applied.created[kind])} re-created, "
                f"{len(applied.kept[kind])} kept as the cluster has them"
            )
        for task, steps in sorted(applied.unknown_steps.items()):
            if steps:
                print(f"  {task}: {', '.join(steps)} came back as outcome unknown")
        for what, why in sorted(applied.failed.items()):
            print(f"  failed: {what}: {why}", file=sys.stderr)


def run_restore(args: argparse.Namespace, url: str, settings: Settings) -> int:
    source = Path(args.source)
    manifest = json.loads((source / "manifest.json").read_text())
    if manifest.get("format") != FORMAT or manifest.get("database") != database.kind(url):
        print("restore: not a backup of this kind of database", file=sys.stderr)
        return 2
    database.restore(url, source / manifest["file"], args.pg_bin)
    report = audit(settings, asyncio.run(read_chains(url)))
    applied = None
    if not args.no_resources and (source / "resources.json").exists():
        backup = json.loads((source / "resources.json").read_text())
        applied = asyncio.run(_apply(args.kubeconfig, backup, url))
    behind = _behind(report)
    _mark(
        url,
        {
            "backup_taken_at": manifest["taken_at"],
            "behind": bool(behind),
            "chains_behind": behind,
            "checkpoints": report.checkpoints,
            "unknown_steps": applied.unknown_steps if applied else {},
        },
    )
    _say(manifest, report, applied)
    if any(p.kind not in BEHIND_KINDS for p in report.problems) or (applied and applied.failed):
        return 1
    return EXIT_BEHIND if behind else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m platform_api.backup")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in (
        ("backup", "copy the database and the resources"),
        ("restore", "restore a copy (the platform stopped)"),
    ):
        command = sub.add_parser(name, help=text)
        if name == "backup":
            command.add_argument("--out", required=True, help="an empty or new directory")
        else:
            command.add_argument("--from", dest="source", required=True, help="a backup")
        command.add_argument("--database-url", default=None, help="default: HUMANWORK_DATABASE_URL")
        command.add_argument("--kubeconfig", default=None, help="default: in-cluster")
        command.add_argument("--no-resources", action="store_true", help="the database only")
        command.add_argument("--pg-bin", default=None, help="where pg_dump/pg_restore are")
    args = parser.parse_args(argv)
    settings = Settings()
    url = args.database_url or settings.database_url
    try:
        if args.command == "backup":
            return run_backup(args, url)
        return run_restore(args, url, settings)
    except (database.BackupError, ConfigurationError) as exc:
        print(f"{args.command}: {exc}", file=sys.stderr)
        return 2
