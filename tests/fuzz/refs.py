"""The `$ref`s of an OpenAPI document, and those that point at nothing inside it (what
breaks validators and client generators alike)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def references(node: Any) -> Iterator[str]:
    """Every `$ref` in a JSON document."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from references(value)
    elif isinstance(node, list):
        for item in node:
            yield from references(item)


def unresolvable(document: dict[str, Any]) -> list[str]:
    """The references that do not point at something inside the document."""
    missing = []
    for ref in sorted(set(references(document))):
        node: Any = document
        if not ref.startswith("#/"):
            missing.append(ref)
            continue
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or part not in node:
                missing.append(ref)
                break
            node = node[part]
    return missing
