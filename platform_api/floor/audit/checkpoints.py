"""Signed checkpoints of the audit chains' heads: the anchor that makes a cut tail visible.

The hash chain alone detects a changed, removed or moved row, but not a tail removed
together with its chain head: whoever owns the tables can delete an org's last rows and
point the head at the new last row, and the shorter chain is consistent. A checkpoint is
the statement "chain C had `seq` rows ending with hash H at time T", signed with an
Ed25519 key (`humanwork_core.tokens.SigningKey`) that the database roles never hold, and
kept outside the database (`platform_api.floor.audit.store`). Comparing each chain with its
latest valid checkpoint then reports:

- `truncated`: the chain ends before the checkpointed row (rows and head cut together,
  or the whole chain deleted);
- `checkpoint_mismatch`: the row the checkpoint names has another hash (the chain was
  rewritten, or cut and appended to again, after the checkpoint);
- `checkpoint_forged`: a checkpoint whose signature does not verify, or signed by a key
  that is not a verification key;
- `checkpoint_malformed`: a stored checkpoint that is not a checkpoint at all.

The signature covers the canonical JSON (`chain.canonical_json`) of every field but the
signature itself, with a `type` naming this format. Everything here is pure.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from humanwork_core.tokens import KeySet, SigningKey
from platform_api.floor.audit.chain import ChainRow, Problem, canonical_json, timestamp

TYPE = "humanwork.io/audit-checkpoint/v1"
_FIELDS = ("type", "chain", "seq", "hash", "at", "kid", "signature")


class CheckpointError(ValueError):
    """A stored checkpoint was refused; `kind` is the Problem kind to report."""

    kind = "checkpoint_malformed"


class CheckpointForged(CheckpointError):
    kind = "checkpoint_forged"


@dataclass(frozen=True)
class Checkpoint:
    """One signed statement of a chain's head."""

    chain: str
    seq: int
    hash: str
    at: str
    kid: str
    signature: str

    def signed_part(self) -> dict[str, Any]:
        return {
            "type": TYPE,
            "chain": self.chain,
            "seq": self.seq,
            "hash": self.hash,
            "at": self.at,
            "kid": self.kid,
        }

    def encode(self) -> bytes:
        """The stored form: the signed fields and the signature, as one JSON line."""
        return canonical_json({**self.signed_part(), "signature": self.signature}) + b"\n"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def sign_checkpoint(
    key: SigningKey, *, chain: str, seq: int, head: str, at: datetime
) -> Checkpoint:
    """A checkpoint of `chain` at (`seq`, `head`), signed with `key`."""
    unsigned = Checkpoint(chain, seq, head, timestamp(at), key.kid, "")
    signature = key.private_key.sign(canonical_json(unsigned.signed_part()))
    return Checkpoint(chain, seq, head, unsigned.at, key.kid, _b64url(signature))


def decode_checkpoint(data: bytes) -> Checkpoint:
    """Parse a stored checkpoint (its signature is not checked); CheckpointError if it is
    not one."""
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"not JSON: {exc}") from None
    if not isinstance(doc, dict) or set(doc) != set(_FIELDS) or doc["type"] != TYPE:
        raise CheckpointError(f"not a {TYPE} document")
    strings = ("chain", "hash", "at", "kid", "signature")
    if not all(isinstance(doc[f], str) for f in strings) or type(doc["seq"]) is not int:
        raise CheckpointError("a field has the wrong type")
    return Checkpoint(*(doc[f] for f in _FIELDS[1:]))


def verify_checkpoint(checkpoint: Checkpoint, keys: KeySet) -> None:
    """Raise CheckpointForged unless a verification key signed exactly this checkpoint."""
    public_key = keys.get(checkpoint.kid)
    if public_key is None:
        raise CheckpointForged(f"signed by unknown key {checkpoint.kid!r}")
    try:
        text = checkpoint.signature
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        public_key.verify(raw, canonical_json(checkpoint.signed_part()))
    except (InvalidSignature, binascii.Error, ValueError):
        raise CheckpointForged("the signature does not match the checkpoint") from None


def load_signing_key(path: Path) -> SigningKey:
    """The checkpoint signing key: a PKCS#8 PEM Ed25519 private key file."""
    return SigningKey.from_pem(path.read_bytes())


def verification_keys(signing: SigningKey | None, jwks_file: Path | None) -> KeySet:
    """The keys checkpoints may be signed with: the signing key's public half and the JWK
    set in `jwks_file` (retired keys, or every key on a machine that only verifies). A
    missing `jwks_file` adds no key (an optional Secret item): fewer keys can only make
    verification stricter."""
    keys: dict[str, Ed25519PublicKey] = {}
    if jwks_file is not None and jwks_file.exists():
        published = KeySet.from_jwks(json.loads(jwks_file.read_text()))
        keys.update({kid: key for kid in published.kids if (key := published.get(kid))})
    if signing is not None:
        keys[signing.kid] = signing.public_key
    return KeySet(keys)


@dataclass(frozen=True)
class Stored:
    """One checkpoint as the store holds it: where, and its bytes."""

    name: str
    data: bytes


def valid_checkpoints(
    stored: Iterable[Stored], keys: KeySet
) -> tuple[dict[str, Checkpoint], list[Problem]]:
    """The latest valid checkpoint of each chain, and a problem for every invalid one."""
    latest: dict[str, Checkpoint] = {}
    problems: list[Problem] = []
    for item in stored:
        try:
            checkpoint = decode_checkpoint(item.data)
            verify_checkpoint(checkpoint, keys)
        except CheckpointError as exc:
            chain = item.name.split("/", 1)[0]
            problems.append(Problem(chain, 0, exc.kind, f"{item.name}: {exc}"))
            continue
        best = latest.get(checkpoint.chain)
        if best is None or (checkpoint.seq, checkpoint.at) > (best.seq, best.at):
            latest[checkpoint.chain] = checkpoint
    return latest, problems


def compare(checkpoint: Checkpoint, rows: list[ChainRow]) -> list[Problem]:
    """What a chain's rows say against its latest valid checkpoint."""
    chain, seq = checkpoint.chain, checkpoint.seq
    last = rows[-1].seq if rows else 0
    if last < seq:
        ends = f"ends at seq {last}" if rows else "has no rows left"
        return [
            Problem(
                chain,
                seq,
                "truncated",
                f"the chain {ends} but the checkpoint signed at {checkpoint.at} covers seq "
                f"{seq}: rows were cut from its end",
            )
        ]
    by_seq = {row.seq: row.hash for row in rows}
    if by_seq.get(seq) != checkpoint.hash:
        return [
            Problem(
                chain,
                seq,
                "checkpoint_mismatch",
                f"row seq {seq} does not have the hash the checkpoint signed at "
                f"{checkpoint.at} says: the chain was rewritten after it",
            )
        ]
    return []


def check_against_checkpoints(
    chains: Mapping[str, list[ChainRow]], stored: Iterable[Stored], keys: KeySet
) -> tuple[list[Problem], dict[str, Checkpoint]]:
    """Every checkpoint problem, and the latest valid checkpoint of each chain."""
    latest, problems = valid_checkpoints(stored, keys)
    for chain, checkpoint in sorted(latest.items()):
        problems.extend(compare(checkpoint, chains.get(chain, [])))
    return problems, latest
