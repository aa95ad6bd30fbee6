"""A throwaway PostgreSQL server for the tests: initdb into a temporary directory, start
on a free 127.0.0.1 port, create databases, stop and remove everything at the end.

The binaries come from Debian's packages (`/usr/lib/postgresql/<version>/bin`,
installed by `humanwork_dev/scripts/install-postgres.sh`). PostgreSQL refuses to run as
root, so when the tests run as root the server runs as the `postgres` system user
(through `runuser`), with its data directory owned by that user; otherwise it runs as the
current user. Authentication is `trust` on the loopback interface only.

Besides the superuser `postgres`, the server has the two roles a production database has
(docs/operations.md): `humanwork_owner`, which owns the schema and runs the migrations,
and `humanwork_app`, which the platform connects as, with only the privileges migration
0005 grants it (it may not change or cut the audit log).
"""

from __future__ import annotations

import asyncio
import atexit
import glob
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import asyncpg  # type: ignore[import-untyped]

from humanwork_dev.running import Running

SUPERUSER = "postgres"
OWNER_ROLE = "humanwork_owner"
APP_ROLE = "humanwork_app"
SYSTEM_USER = "postgres"
INSTALL_HINT = "run `make postgres-binaries` (humanwork_dev/scripts/install-postgres.sh) as root"


class PostgresError(RuntimeError):
    """PostgreSQL cannot be had: no binaries, or the server does not start."""


def find_bin_dir() -> Path:
    """The newest `/usr/lib/postgresql/*/bin` that holds initdb and pg_ctl."""
    found = [
        Path(p).parent
        for p in glob.glob("/usr/lib/postgresql/*/bin/initdb")
        if (Path(p).parent / "pg_ctl").exists()
    ]
    if not found:
        raise PostgresError(
            f"no PostgreSQL binaries under /usr/lib/postgresql/*/bin; {INSTALL_HINT}"
        )

    def version(path: Path) -> tuple[int, ...]:
        return tuple(int(x) for x in re.findall(r"\d+", path.parent.name)) or (0,)

    return max(found, key=version)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _valid_name(name: str) -> str:
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", name):
        raise ValueError(f"not a safe database name: {name!r}")
    return name


class PostgresServer(Running):
    """One PostgreSQL cluster in a temporary directory, listening on 127.0.0.1."""

    def __init__(self, bin_dir: Path | None = None) -> None:
        self.bin_dir = bin_dir or find_bin_dir()
        self.root = Path(tempfile.mkdtemp(prefix="humanwork-pg-"))
        self.data_dir = self.root / "data"
        self.socket_dir = self.root / "sock"
        self.log_file = self.root / "postgres.log"
        self.port = 0
        self.started = False
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            try:
                pw = pwd.getpwnam(SYSTEM_USER)
            except KeyError:
                raise PostgresError(
                    f"running as root and no `{SYSTEM_USER}` system user; {INSTALL_HINT}"
                ) from None
            runuser = shutil.which("runuser")
            if runuser is None:
                raise PostgresError("running as root and `runuser` is missing (util-linux)")
            self._as_user = [runuser, "-u", SYSTEM_USER, "--"]
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
        self.root.chmod(0o700)

    def _run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [*self._as_user, *args],
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if done.returncode != 0:
            raise PostgresError(
                f"{Path(args[0]).name} failed ({done.returncode}): "
                f"{(done.stderr or done.stdout).strip()[-2000:]}"
            )
        return done

    def start(self, timeout: float = 60) -> None:
        """initdb and start the server; raises `PostgresError` with the server's log."""
        self._run(
            str(self.bin_dir / "initdb"),
            "-D",
            str(self.data_dir),
            "-U",
            SUPERUSER,
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
        )
        self._run("mkdir", "-p", str(self.socket_dir))
        self.port = free_port()
        options = " ".join(
            [
                "-c listen_addresses=127.0.0.1",
                f"-c port={self.port}",
                f"-c unix_socket_directories={self.socket_dir}",
                "-c fsync=off",
                "-c synchronous_commit=off",
                "-c full_page_writes=off",
                "-c max_connections=200",
                "-c shared_buffers=64MB",
            ]
        )
        try:
            self._run(
                str(self.bin_dir / "pg_ctl"),
                "-D",
                str(self.data_dir),
                "-l",
                str(self.log_file),
                "-o",
                options,
                "-w",
                "-t",
                str(int(timeout)),
                "start",
                timeout=timeout + 10,
            )
        except PostgresError as exc:
            raise PostgresError(f"{exc}\n--- server log ---\n{self.log()}") from None
        self.started = True
        atexit.register(self.stop)  # also when the test session dies without teardown
        deadline = time.monotonic() + timeout
        while True:
            try:
                asyncio.run(self._execute("postgres", "SELECT 1"))
                break
            except (OSError, asyncpg.PostgresError) as exc:
                if time.monotonic() > deadline:
                    raise PostgresError(f"server does not answer: {exc}\n{self.log()}") from None
                time.sleep(0.2)
        for role in (OWNER_ROLE, APP_ROLE):
            asyncio.run(self._execute("postgres", f"CREATE ROLE {role} LOGIN"))

    def log(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")[-4000:]
        except OSError:
            return "(no log)"

    def dsn(self, database: str) -> str:
        """A libpq-style DSN for asyncpg."""
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def url(self, database: str, role: str = SUPERUSER) -> str:
        """A SQLAlchemy URL (asyncpg driver), connecting as `role`."""
        return f"postgresql+asyncpg://{role}@127.0.0.1:{self.port}/{database}"

    async def _execute(self, database: str, sql: str) -> None:
        conn = await asyncpg.connect(self.dsn(database), timeout=10)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    async def create_database(
        self, name: str, template: str | None = None, owner: str | None = None
    ) -> str:
        """Create database `name` (copied from `template` when given, owned by `owner` when
        given); its SQLAlchemy URL (as the superuser)."""
        sql = f'CREATE DATABASE "{_valid_name(name)}"'
        if template:
            sql += f' TEMPLATE "{_valid_name(template)}"'
        if owner:
            sql += f' OWNER "{_valid_name(owner)}"'
        await self._execute("postgres", sql)
        return self.url(name)

    async def drop_database(self, name: str) -> None:
        await self._execute(
            "postgres", f'DROP DATABASE IF EXISTS "{_valid_name(name)}" WITH (FORCE)'
        )

    def pid(self) -> int:
        """The postmaster's process id (the first line of its pid file), for the benches
        that count the server's CPU with its backends'."""
        return int((self.data_dir / "postmaster.pid").read_text().split("\n", 1)[0])

    def stop(self) -> None:
        """Stop the server (fast shutdown) and remove its directory."""
        try:
            if self.started:
                subprocess.run(
                    [
                        *self._as_user,
                        str(self.bin_dir / "pg_ctl"),
                        "-D",
                        str(self.data_dir),
                        "-m",
                        "fast",
                        "-w",
                        "stop",
                    ],
                    cwd=self.root,
                    capture_output=True,
                    timeout=60,
                    check=False,
                )
                self.started = False
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
            atexit.unregister(self.stop)
