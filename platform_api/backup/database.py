"""The platform database's copy: `pg_dump`/`pg_restore` (custom format) for PostgreSQL,
SQLite's online backup API for SQLite (a consistent copy while the platform runs).

PostgreSQL's client binaries are found in `--pg-bin`, then `HUMANWORK_PG_BIN`, then on
`PATH`, then in the newest `/usr/lib/postgresql/*/bin` (Debian's packages, what `make
postgres-binaries` installs). The URL is the platform's (`postgresql+asyncpg://...`): the
driver is dropped for the binaries, and the password goes through `PGPASSWORD`, never the
command line.
"""

from __future__ import annotations

import glob
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

from sqlalchemy.engine import make_url


class BackupError(Exception):
    """A copy or a restore that could not be made."""


def kind(url: str) -> str:
    """`postgresql` or `sqlite`."""
    backend = make_url(url).get_backend_name()
    if backend not in ("postgresql", "sqlite"):
        raise BackupError(f"unsupported database {backend!r}: PostgreSQL or SQLite")
    return backend


def find_pg_bin(explicit: str | None = None) -> Path:
    """The directory of `pg_dump` and `pg_restore`."""
    for candidate in (explicit, os.environ.get("HUMANWORK_PG_BIN")):
        if candidate:
            return Path(candidate)
    found = shutil.which("pg_dump")
    if found:
        return Path(found).parent
    dirs = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/pg_dump"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    if not dirs:
        raise BackupError(
            "no pg_dump: pass --pg-bin, set HUMANWORK_PG_BIN, or install PostgreSQL's "
            "client binaries (`make postgres-binaries`)"
        )
    return Path(dirs[-1]).parent


def _libpq(url: str) -> tuple[str, dict[str, str]]:
    """The URL for libpq (no driver, no password) and the environment with the password."""
    parsed = make_url(url)
    env = dict(os.environ)
    if parsed.password:
        env["PGPASSWORD"] = str(parsed.password)
    plain = parsed.set(drivername="postgresql", password=None)
    return plain.render_as_string(hide_password=False), env


def _run(args: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise BackupError(f"{Path(args[0]).name} failed: {done.stderr.strip()[-2000:]}")


def _sqlite_path(url: str) -> Path:
    database = make_url(url).database
    if not database or database == ":memory:":
        raise BackupError("an in-memory SQLite database has nothing to back up")
    return Path(database)


def _sqlite_copy(source: Path, target: Path) -> None:
    src, dst = sqlite3.connect(source), sqlite3.connect(target)
    try:
        with dst:
            src.backup(dst)
    finally:
        src.close()
        dst.close()


def dump(url: str, target: Path, pg_bin: str | None = None) -> None:
    """Copy the database at `url` into the file `target`."""
    if kind(url) == "sqlite":
        _sqlite_copy(_sqlite_path(url), target)
        return
    plain, env = _libpq(url)
    tool = str(find_pg_bin(pg_bin) / "pg_dump")
    _run([tool, "--format=custom", f"--file={target}", f"--dbname={plain}"], env)


def restore(url: str, source: Path, pg_bin: str | None = None) -> None:
    """Replace the database at `url` with the copy in `source` (the platform stopped)."""
    if kind(url) == "sqlite":
        _sqlite_copy(source, _sqlite_path(url))
        return
    plain, env = _libpq(url)
    tool = str(find_pg_bin(pg_bin) / "pg_restore")
    _run(
        [tool, "--clean", "--if-exists", "--single-transaction", f"--dbname={plain}", str(source)],
        env,
    )
