"""The pieces the database hashes an audit row from (`chain.hash_pieces`, used by the
one-statement append on PostgreSQL) give exactly the hash `row_hash` gives, for any
content: quotes, backslashes, non-ASCII and astral characters, nested details."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

import pytest

from platform_api.floor.audit.chain import GENESIS, content_of, hash_pieces, row_hash, timestamp

DETAILS: list[dict[str, Any]] = [
    {},
    {"step_id": "read", "approvals": 1, "decided": True, "feedback": None},
    {"feedback": 'quote " backslash \\ tab \t newline \n nul \x00', "z": [1, 2.5, {"b": 1}]},
    {"name": "Zoë 🚀 \u2028 漢字", "seq": 99, "target": "inner keys", "at": "not the at"},
]


@pytest.mark.parametrize("details", DETAILS)
@pytest.mark.parametrize("org_id", [None, "6f1c7a52-8d2e-4d4b-9a3e-0c1f2d3e4f50"])
def test_pieces_hash_like_row_hash(details: dict[str, Any], org_id: str | None) -> None:
    at = datetime(2026, 12, 1, 7, 5, 9, 42, tzinfo=UTC)
    fields = {"chain": org_id or "platform", "org_id": org_id, "actor": 'ann "o\'neil"'}
    fields |= {"action": "task.step.approve", "target": "agentictask:ns/t-é", "outcome": "ok"}
    p0, p1, p2, p3 = hash_pieces(details=details, **fields)  # type: ignore[arg-type]
    for seq, prev in [(1, GENESIS), (12345, "ab" * 32)]:
        content = content_of(seq=seq, at=at, details=details, **fields)  # type: ignore[arg-type]
        joined = p0 + timestamp(at).encode() + p1 + str(seq).encode() + p2 + prev.encode() + p3
        assert hashlib.sha256(joined).hexdigest() == row_hash(content, prev)
