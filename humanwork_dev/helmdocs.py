"""The values table of the Helm chart's README, generated from the chart's values.yaml so
that it never drifts from the defaults:

    python -m humanwork_dev.helmdocs            # rewrite the table in charts/.../README.md
    python -m humanwork_dev.helmdocs --check    # exit 1 when the table is stale

Each value is documented by the comment lines right above its key in values.yaml. A key
whose comment is there gets a row (its dotted path, its default as JSON, the comment); a
map without a comment gets rows for its keys. Every value must be covered by a row: an
undocumented one is an error, so a new value cannot slip in without a description.
`make lint` runs the check; tests/unit/test_helmdocs.py covers the parsing.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
CHART = Path("charts/humanwork-operator")
BEGIN = "<!-- generated: values (python -m humanwork_dev.helmdocs); do not edit -->"
END = "<!-- end generated: values -->"
_KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z0-9_.-]+):(?:\s|$)")
_COMMENT = re.compile(r"^ *# ?(?P<text>.*)$")


class ValuesDocError(ValueError):
    """values.yaml has a value no comment documents, or the README lacks the markers."""


@dataclass(frozen=True)
class Row:
    """One documented value: its dotted path, its default and what it means."""

    path: str
    default: str
    meaning: str


def comments(text: str) -> dict[tuple[str, ...], str]:
    """Each key's path mapped to the comment lines right above it (joined by spaces)."""
    found: dict[tuple[str, ...], str] = {}
    stack: list[tuple[int, str]] = []
    pending: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            pending = []
            continue
        comment = _COMMENT.match(line)
        if comment:
            pending.append(comment["text"].strip())
            continue
        key = _KEY.match(line)
        if key is None:
            pending = []
            continue
        indent = len(key["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, key["key"]))
        if pending:
            found[tuple(k for _, k in stack)] = " ".join(pending)
        pending = []
    return found


def rows(text: str) -> list[Row]:
    """The table's rows, in the file's order; raises on an undocumented value."""
    values = yaml.safe_load(text) or {}
    documented = comments(text)
    out: list[Row] = []
    _walk(values, (), documented, out)
    return out


def _walk(
    node: Any, path: tuple[str, ...], documented: dict[tuple[str, ...], str], out: list[Row]
) -> None:
    meaning = documented.get(path)
    children = node if isinstance(node, dict) else {}
    child_documented = any(p[: len(path)] == path and len(p) > len(path) for p in documented)
    if meaning is not None and not (children and child_documented):
        out.append(Row(".".join(path), _default(node), meaning))
        return
    if meaning is not None:
        out.append(Row(".".join(path), "", meaning))
    if not children:
        if meaning is None:
            raise ValuesDocError(f"values.yaml: {'.'.join(path)} has no comment above it")
        return
    for key, value in children.items():
        _walk(value, (*path, str(key)), documented, out)


def _default(value: Any) -> str:
    text = json.dumps(value, sort_keys=False)
    return text.replace("|", "\\|")


def table(text: str) -> str:
    """The Markdown table of values.yaml's documented values."""
    lines = ["| Value | Default | Meaning |", "| --- | --- | --- |"]
    for row in rows(text):
        default = f"`{row.default}`" if row.default else ""
        meaning = row.meaning.replace("|", "\\|")
        lines.append(f"| `{row.path}` | {default} | {meaning} |")
    return "\n".join(lines)


def render(readme: str, values: str) -> str:
    """The README with its generated section replaced by the table of `values`."""
    start, end = readme.find(BEGIN), readme.find(END)
    if start < 0 or end < start:
        raise ValuesDocError(f"the chart's README.md lacks the markers {BEGIN!r} ... {END!r}")
    return readme[: start + len(BEGIN)] + "\n" + table(values) + "\n" + readme[end:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--chart", type=Path, default=REPO / CHART, help="the chart's folder")
    parser.add_argument("--check", action="store_true", help="exit 1 if the table is stale")
    args = parser.parse_args(argv)
    readme_path = args.chart / "README.md"
    readme = readme_path.read_text()
    try:
        wanted = render(readme, (args.chart / "values.yaml").read_text())
    except ValuesDocError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if wanted == readme:
        return 0
    if args.check:
        print(f"{readme_path} is stale: run python -m humanwork_dev.helmdocs", file=sys.stderr)
        return 1
    readme_path.write_text(wanted)
    print(f"wrote {readme_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
