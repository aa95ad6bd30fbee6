"""How the three Kubernetes clients put a body on the wire, written once.

The API server reads a server-side apply body as YAML. JSON with ASCII escapes writes a
character outside the Basic Multilingual Plane (an emoji in an expert's feedback, a
specialist's name, an upstream's product title) as a surrogate pair, which YAML refuses
(400 "found invalid Unicode character escape code"). A body encoded as UTF-8 JSON is read
the same by the JSON and the YAML decoders."""

from __future__ import annotations

import json
from typing import Any

APPLY_CONTENT_TYPE = "application/apply-patch+yaml; charset=utf-8"
"""Server-side apply. With the charset, the generated Python clients pass a body given as
bytes through unchanged (without it they would serialise it again)."""


def encode_body(body: Any) -> bytes:
    """A request body as UTF-8 JSON, never with surrogate escapes."""
    return json.dumps(body, ensure_ascii=False).encode()
