"""Pure hash-chain rules of the audit log.

Each row's `hash` is SHA-256 over the canonical JSON (sorted keys, no spaces, UTF-8) of its
content together with `prev_hash`, the previous row's hash in the same chain (64 zeros
for the first row). `verify_chain` walks one chain in sequence order and reports every
row that was altered, removed or moved, and a head that does not match the last row.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

GENESIS = "0" * 64
PLATFORM_CHAIN = "platform"


def timestamp(at: datetime) -> str:
    """The canonical text of a timestamp: UTC, microseconds, `Z` suffix (naive means UTC)."""
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def canonical_json(value: Any) -> bytes:
    """Deterministic JSON bytes of `value`."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode()


def row_hash(content: Mapping[str, Any], prev_hash: str) -> str:
    """The hash of a row with `content` following a row with hash `prev_hash`."""
    return hashlib.sha256(canonical_json({"content": dict(content), "prev": prev_hash})).hexdigest()


def content_of(
    *,
    chain: str,
    seq: int,
    org_id: str | None,
    at: datetime,
    actor: str,
    action: str,
    target: str,
    outcome: str,
    details: Mapping[str, Any],
) -> dict[str, Any]:
    """The hashed content of one audit row."""
    return {
        "chain": chain,
        "seq": seq,
        "org_id": org_id,
        "at": timestamp(at),
        "actor": actor,
        "action": action,
        "target": target,
        "outcome": outcome,
        "details": dict(details),
    }


HASHED_TIMESTAMP_SQL = """to_char({at} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')"""
"""PostgreSQL's text of a timestamptz `{at}`, the same as `timestamp` writes it."""


def hash_pieces(
    *,
    chain: str,
    org_id: str | None,
    actor: str,
    action: str,
    target: str,
    outcome: str,
    details: Mapping[str, Any],
) -> tuple[bytes, bytes, bytes, bytes]:
    """The bytes hashed for a row, cut where the three values the chain's head decides go:
    `row_hash(content, prev) == sha256(p0 + ts + p1 + str(seq) + p2 + prev + p3)` for the
    content of `content_of` with timestamp text `ts` and sequence number `seq`. So the
    database can compute a row's hash in the very statement that moves the head."""
    content = content_of(
        chain=chain,
        seq=0,
        org_id=org_id,
        at=datetime.fromtimestamp(0, UTC),
        actor=actor,
        action=action,
        target=target,
        outcome=outcome,
        details=details,
    )
    keys = sorted(content)
    assert keys[2] == "at" and keys[-2:] == ["seq", "target"], keys
    before_at = {k: content[k] for k in keys[:2]}
    between = {k: content[k] for k in keys[3:-2]}
    p0 = b'{"content":' + canonical_json(before_at)[:-1] + b',"at":"'
    p1 = b'",' + canonical_json(between)[1:-1] + b',"seq":'
    p2 = b',"target":' + canonical_json(target) + b'},"prev":"'
    return p0, p1, p2, b'"}'


@dataclass(frozen=True)
class ChainRow:
    """What verification needs of one stored row."""

    id: int
    content: dict[str, Any]
    prev_hash: str
    hash: str

    @property
    def seq(self) -> int:
        return int(self.content["seq"])


@dataclass(frozen=True)
class Problem:
    """One inconsistency found in a chain."""

    chain: str
    seq: int
    kind: str
    message: str

    def __str__(self) -> str:
        return f"{self.chain} #{self.seq}: {self.kind}: {self.message}"


def verify_chain(
    chain: str, rows: Iterable[ChainRow], head: tuple[int, str] | None
) -> list[Problem]:
    """Check one chain's rows (ordered by seq) and its head (last seq, last hash)."""
    problems: list[Problem] = []
    prev_hash, expected_seq = GENESIS, 1
    for row in rows:
        if row.seq != expected_seq:
            kind = "missing" if row.seq > expected_seq else "out_of_order"
            problems.append(
                Problem(chain, row.seq, kind, f"expected seq {expected_seq}, found {row.seq}")
            )
        if row.prev_hash != prev_hash:
            problems.append(
                Problem(chain, row.seq, "broken_link", "prev_hash does not match previous row")
            )
        if row_hash(row.content, row.prev_hash) != row.hash:
            problems.append(Problem(chain, row.seq, "altered", "content does not match its hash"))
        prev_hash, expected_seq = row.hash, row.seq + 1
    last_seq = expected_seq - 1
    if head is None:
        if last_seq:
            problems.append(Problem(chain, last_seq, "head", "chain has rows but no head"))
    elif head != (last_seq, prev_hash):
        problems.append(
            Problem(
                chain,
                head[0],
                "head",
                f"head says seq {head[0]}, last row is seq {last_seq} (rows removed at the end?)",
            )
        )
    return problems
