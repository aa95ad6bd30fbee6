"""The pure rules of the signed audit checkpoints: what a stored checkpoint must look like,
whose signature counts, which checkpoint a chain is compared with, and what a comparison
reports."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from humanwork_core.tokens import KeySet, generate_signing_key
from platform_api.floor.audit.chain import GENESIS, ChainRow, content_of, row_hash
from platform_api.floor.audit.checkpoints import (
    CheckpointError,
    CheckpointForged,
    Stored,
    compare,
    decode_checkpoint,
    sign_checkpoint,
    valid_checkpoints,
    verify_checkpoint,
)

KEY = generate_signing_key()
KEYS = KeySet({KEY.kid: KEY.public_key})
AT = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _chain(n: int, chain: str = "org") -> list[ChainRow]:
    rows, prev = [], GENESIS
    for seq in range(1, n + 1):
        content = content_of(
            chain=chain,
            seq=seq,
            org_id=None,
            at=AT,
            actor="a",
            action="x",
            target=str(seq),
            outcome="success",
            details={},
        )
        digest = row_hash(content, prev)
        rows.append(ChainRow(seq, content, prev, digest))
        prev = digest
    return rows


def test_a_signed_checkpoint_round_trips_and_verifies() -> None:
    rows = _chain(3)
    checkpoint = sign_checkpoint(KEY, chain="org", seq=3, head=rows[-1].hash, at=AT)
    again = decode_checkpoint(checkpoint.encode())
    assert again == checkpoint
    verify_checkpoint(again, KEYS)
    assert compare(again, rows) == []
    assert compare(again, _chain(5)) == []  # rows appended later are fine


@pytest.mark.parametrize(
    "change",
    [
        {"seq": 2},
        {"hash": "0" * 64},
        {"chain": "other"},
        {"at": "2026-11-30T11:00:00.000000Z"},
        {"signature": "AAAA"},
        {"signature": "not base64 !"},
    ],
)
def test_any_changed_field_breaks_the_signature(change: dict[str, object]) -> None:
    checkpoint = sign_checkpoint(KEY, chain="org", seq=3, head="a" * 64, at=AT)
    edited = decode_checkpoint(json.dumps({**json.loads(checkpoint.encode()), **change}).encode())
    with pytest.raises(CheckpointForged):
        verify_checkpoint(edited, KEYS)


def test_a_checkpoint_of_another_key_is_forged() -> None:
    other = sign_checkpoint(generate_signing_key(), chain="org", seq=1, head="a" * 64, at=AT)
    with pytest.raises(CheckpointForged, match="unknown key"):
        verify_checkpoint(other, KEYS)


@pytest.mark.parametrize(
    "data",
    [
        b"not json",
        b"[]",
        b'{"type": "something else"}',
        json.dumps(
            {
                "type": "humanwork.io/audit-checkpoint/v1",
                "chain": "org",
                "seq": True,
                "hash": "a",
                "at": "t",
                "kid": "k",
                "signature": "s",
            }
        ).encode(),
    ],
)
def test_what_is_not_a_checkpoint_is_malformed(data: bytes) -> None:
    with pytest.raises(CheckpointError) as refused:
        decode_checkpoint(data)
    assert refused.value.kind == "checkpoint_malformed"


def test_the_latest_valid_checkpoint_is_compared_and_the_invalid_ones_reported() -> None:
    rows = _chain(4)
    early = sign_checkpoint(KEY, chain="org", seq=2, head=rows[1].hash, at=AT)
    late = sign_checkpoint(KEY, chain="org", seq=4, head=rows[3].hash, at=AT)
    forged = sign_checkpoint(generate_signing_key(), chain="org", seq=9, head="f" * 64, at=AT)
    stored = [Stored(f"org/{c.seq}.json", c.encode()) for c in (early, late, forged)]
    latest, problems = valid_checkpoints(stored, KEYS)
    assert latest == {"org": late}
    assert [(p.chain, p.kind) for p in problems] == [("org", "checkpoint_forged")]


def test_a_cut_or_rewritten_chain_is_reported() -> None:
    rows = _chain(5)
    checkpoint = sign_checkpoint(KEY, chain="org", seq=5, head=rows[-1].hash, at=AT)
    (cut,) = compare(checkpoint, rows[:3])
    assert (cut.seq, cut.kind) == (5, "truncated") and "ends at seq 3" in cut.message
    (gone,) = compare(checkpoint, [])
    assert gone.kind == "truncated" and "no rows left" in gone.message
    (rewritten,) = compare(checkpoint, _chain(6, chain="org-rewritten"))
    assert rewritten.kind == "checkpoint_mismatch"
