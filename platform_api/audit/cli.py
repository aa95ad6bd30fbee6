"""`audit verify`: check every hash chain of a database and report what was tampered with.

Used by `humanwork-platform audit-verify` and `python -m platform_api.audit verify`; exits
0 when every chain is intact, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from platform_api.audit.chain import Problem
from platform_api.audit.service import verify
from platform_api.db import make_engine, make_sessionmaker
from platform_api.settings import Settings


async def verify_database(url: str) -> list[Problem]:
    """Every problem of every audit chain in the database at `url`."""
    engine = make_engine(url)
    try:
        async with make_sessionmaker(engine)() as session, session.begin():
            return await verify(session)
    finally:
        await engine.dispose()


def run_verify(url: str | None = None) -> int:
    """Verify and print; the process exit status."""
    problems = asyncio.run(verify_database(url or Settings().database_url))
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f"audit log: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print("audit log: every chain intact")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m platform_api.audit")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("verify", help="verify every hash chain")
    check.add_argument("--database-url", default=None, help="default: HUMANWORK_DATABASE_URL")
    args = parser.parse_args(argv)
    return run_verify(args.database_url)
