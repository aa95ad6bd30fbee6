"""The size rule of the product folders, the development harness and the benches: no
function over 60 lines, no module over 600. `python -m humanwork_dev.sizes` lists the
offenders and exits 1 when there are any; `make lint` runs it. The web UI's script is not
Python and is not counted."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOTS = (
    "humanwork_core",
    "platform_api",
    "agent_image",
    "operator",
    "kubectl_humanwork",
    "humanwork_dev",
    "bench",
)
MAX_FUNCTION = 60
MAX_MODULE = 600


def offenders(repo: Path) -> list[str]:
    """One line per module over MAX_MODULE lines and function over MAX_FUNCTION."""
    found: list[str] = []
    for root in ROOTS:
        for path in sorted((repo / root).rglob("*.py")):
            source = path.read_text()
            where = path.relative_to(repo)
            lines = source.count("\n")
            if lines > MAX_MODULE:
                found.append(f"{where}: module of {lines} lines (at most {MAX_MODULE})")
            for node in ast.walk(ast.parse(source)):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    length = (node.end_lineno or node.lineno) - node.lineno + 1
                    if length > MAX_FUNCTION:
                        found.append(
                            f"{where}:{node.lineno}: {node.name} has {length} lines"
                            f" (at most {MAX_FUNCTION})"
                        )
    return found


def main() -> int:
    found = offenders(Path(__file__).resolve().parent.parent)
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
