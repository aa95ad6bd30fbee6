"""Helpers for the platform's OpenAPI document.

`body_schema(model)` is a pydantic model's JSON schema for an `openapi_extra` request
body: FastAPI copies such a schema into the document as it is, so the `#/$defs/...`
references pydantic writes would point at nothing there (no client generator or
validator could resolve them). They are inlined instead.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

_DEFS = "#/$defs/"


def body_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema with every `#/$defs/` reference replaced by its target."""
    schema = model.model_json_schema()
    defs: dict[str, Any] = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, list):
            return [inline(item) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_DEFS):
            rest = {key: value for key, value in node.items() if key != "$ref"}
            return inline({**defs[ref.removeprefix(_DEFS)], **rest})
        return {key: inline(value) for key, value in node.items()}

    result: dict[str, Any] = inline(schema)
    return result
