"""The command line every generator of files in the repository shares: write what is
stale, or with `--check` list it and exit 1 (what `make lint` runs)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path


def write_or_check(
    prog: str, description: str | None, rendered: Callable[[], dict[Path, str]],
    repo: Path, argv: list[str] | None = None,
) -> int:  # fmt: skip
    """Compare each of `rendered()`'s {path under `repo`: content} with the file there."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--check", action="store_true", help="list stale files, exit 1 if any")
    args = parser.parse_args(argv)
    late = {
        path: text
        for path, text in rendered().items()
        if not (repo / path).exists() or (repo / path).read_text() != text
    }
    for path, text in late.items():
        if args.check:
            print(f"stale: {path} (run python -m {prog.split()[-1]})")
        else:
            (repo / path).write_text(text)
            print(f"wrote {path}")
    return 1 if args.check and late else 0
