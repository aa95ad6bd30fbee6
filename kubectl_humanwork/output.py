"""Printing: kubectl-style tables, or the API's JSON / YAML as it is."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

import yaml

FORMATS = ("table", "json", "yaml")


def dump(data: Any, fmt: str, out: TextIO) -> None:
    """`data` as JSON or YAML."""
    if fmt == "json":
        out.write(json.dumps(data, indent=2, sort_keys=False) + "\n")
    else:
        out.write(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))


def table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], out: TextIO, indent: str = ""
) -> None:
    """Left-aligned columns separated by three spaces, like kubectl get."""
    cells = [[_text(value) for value in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(value)) for w, value in zip(widths, row, strict=True)]
    for row in [list(headers), *cells]:
        line = "   ".join(value.ljust(width) for value, width in zip(row, widths, strict=True))
        out.write(indent + line.rstrip() + "\n")


def _text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value).replace("\n", " ")


def clip(text: str | None, width: int) -> str:
    if not text:
        return "-"
    return text if len(text) <= width else text[: width - 1] + "…"


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def age(seconds: float) -> str:
    """kubectl's short durations: 45s, 12m, 3h, 2d."""
    seconds = abs(int(seconds))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    if seconds < 172800:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def until(value: str | None, now: datetime | None = None) -> str:
    """A deadline relative to now: `in 12m`, `overdue 3m`, or `-`."""
    moment = parse_time(value)
    if moment is None:
        return "-"
    delta = (moment - (now or datetime.now(UTC))).total_seconds()
    return f"in {age(delta)}" if delta >= 0 else f"overdue {age(delta)}"


def pretty(value: Any) -> str:
    """Compact JSON for parameters and results in a table or a detail line."""
    return json.dumps(value, sort_keys=True, separators=(", ", ": "))
