"""HMAC-SHA256 signatures of the callbacks between an agent and the platform.

Agent -> platform events and platform -> agent commands carry a header (see
:data:`SIGNATURE_HEADER`) of the form ``t=<unix seconds>,v1=<hex HMAC-SHA256>``, the MAC being
taken with the AgentInstance's callback secret over ``<t>.<raw body bytes>``. Binding the
timestamp into the MAC lets the receiver refuse replays outside a window; the request's
idempotency key (:data:`IDEMPOTENCY_HEADER`) deduplicates replays inside it.

A header may carry several ``v1`` values (the sender signing with the current and the
previous secret while a secret is rotated), and the receiver may try several secrets; one
match is enough. Comparisons are constant-time. Everything here is pure: the clock is passed
in. Refusals raise a :class:`SignatureError` subclass with a stable `code`:
`signature_missing`, `signature_malformed`, `signature_mismatch`, `signature_expired`.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Sequence
from datetime import datetime
from typing import ClassVar

from .errors import HumanworkError

SIGNATURE_HEADER = "X-Humanwork-Signature"
IDEMPOTENCY_HEADER = "Idempotency-Key"
SCHEME = "v1"
DEFAULT_TOLERANCE_SECONDS = 300
SECRET_BYTES = 32

_TIMESTAMP = re.compile(r"[0-9]{1,12}")
_HEX_MAC = re.compile(r"[0-9a-f]{64}")
_MAX_HEADER_LENGTH = 1024

Secret = str | bytes


class SignatureError(HumanworkError):
    """A signed request was refused; the subclass's `code` says why."""

    code: ClassVar[str] = "signature_invalid"


class SignatureMissing(SignatureError):
    code: ClassVar[str] = "signature_missing"


class SignatureMalformed(SignatureError):
    code: ClassVar[str] = "signature_malformed"


class SignatureMismatch(SignatureError):
    code: ClassVar[str] = "signature_mismatch"


class SignatureExpired(SignatureError):
    code: ClassVar[str] = "signature_expired"


def generate_secret() -> str:
    """A new random callback secret: 256 bits as 64 hex characters."""
    return secrets.token_hex(SECRET_BYTES)


DERIVATION_LABEL = b"humanwork.io/callback-secret/v1"


def derive_secret(master: Secret, namespace: str, name: str, uid: str) -> str:
    """The callback secret of AgentInstance `namespace/name` (uid `uid`): hex
    HMAC-SHA256 of the instance's identity under the installation's callback master key.

    The operator writes it into the instance's Secret and the platform API computes it
    again to verify that instance's events, so the platform needs to read one Secret (the
    master key) instead of every org's Secrets. HMAC is a PRF: one agent's secret tells
    nothing about another's, or about the master key. The uid binds the secret to one
    incarnation: an AgentInstance deleted and created again under the same name gets a
    new secret."""
    if not (namespace and name and uid):
        raise ValueError("namespace, name and uid are all needed to derive a secret")
    message = b"\0".join((DERIVATION_LABEL, namespace.encode(), name.encode(), uid.encode()))
    return hmac.new(_key(master), message, hashlib.sha256).hexdigest()


def _key(secret: Secret) -> bytes:
    key = secret.encode("utf-8") if isinstance(secret, str) else secret
    if not key:
        raise ValueError("the signing secret must not be empty")
    return key


def _body(body: bytes | str) -> bytes:
    return body.encode("utf-8") if isinstance(body, str) else body


def _unix(value: int | datetime) -> int:
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError("timestamps must be timezone-aware")
        return int(value.timestamp())
    return value


def compute_mac(secret: Secret, body: bytes | str, timestamp: int) -> str:
    """Hex HMAC-SHA256 of ``<timestamp>.<body>`` under `secret`."""
    message = str(timestamp).encode("ascii") + b"." + _body(body)
    return hmac.new(_key(secret), message, hashlib.sha256).hexdigest()


def sign(secret: Secret, body: bytes | str, timestamp: int | datetime) -> str:
    """The signature header value for `body` sent at `timestamp`: ``t=<unix>,v1=<hex>``."""
    ts = _unix(timestamp)
    if ts < 0:
        raise ValueError("timestamp must not be negative")
    return f"t={ts},{SCHEME}={compute_mac(secret, body, ts)}"


def parse_header(header: str | None) -> tuple[int, tuple[str, ...]]:
    """Split a signature header into its timestamp and its ``v1`` MACs.

    Unknown schemes (a future ``v2``) are ignored; a header without exactly one ``t`` or
    without any well-formed ``v1`` is malformed.
    """
    if header is None or not header.strip():
        raise SignatureMissing("the request carries no signature")
    if len(header) > _MAX_HEADER_LENGTH:
        raise SignatureMalformed("the signature header is too long")
    timestamps: list[str] = []
    macs: list[str] = []
    for part in header.split(","):
        name, sep, value = part.strip().partition("=")
        if not sep:
            raise SignatureMalformed("the signature header is not a list of name=value")
        if name == "t":
            timestamps.append(value)
        elif name == SCHEME:
            if not _HEX_MAC.fullmatch(value):
                raise SignatureMalformed("a v1 signature must be 64 lowercase hex characters")
            macs.append(value)
    if len(timestamps) != 1 or not _TIMESTAMP.fullmatch(timestamps[0]):
        raise SignatureMalformed("the signature header needs one t=<unix seconds>")
    if not macs:
        raise SignatureMalformed("the signature header has no v1 signature")
    return int(timestamps[0]), tuple(macs)


def verify(
    secret: Secret | Sequence[Secret],
    header: str | None,
    body: bytes | str,
    now: int | datetime,
    tolerance_seconds: int = DEFAULT_TOLERANCE_SECONDS,
) -> int:
    """Check a signature header against `body`; return its timestamp, or raise.

    `secret` may be one secret or several (current and previous, during rotation). The MAC
    is checked first, so `signature_expired` means a genuine but stale (or future-dated)
    request: its timestamp is more than `tolerance_seconds` away from `now`.
    """
    timestamp, macs = parse_header(header)
    candidates: Sequence[Secret] = [secret] if isinstance(secret, str | bytes) else list(secret)
    if not candidates:
        raise ValueError("at least one secret is needed")
    matched = False
    for candidate in candidates:
        expected = compute_mac(candidate, body, timestamp).encode("ascii")
        for mac in macs:
            # No early exit: every comparison runs, each in constant time.
            matched |= hmac.compare_digest(expected, mac.encode("ascii"))
    if not matched:
        raise SignatureMismatch("the signature does not match the body")
    if abs(_unix(now) - timestamp) > tolerance_seconds:
        raise SignatureExpired(
            "the signature's timestamp is outside the replay window", timestamp=str(timestamp)
        )
    return timestamp
