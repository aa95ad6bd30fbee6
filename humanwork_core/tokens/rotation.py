"""Rotation planning: when to replace a token (with a deterministic jitter) and which
signing keys must stay published."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Generic, TypeVar

from .claims import DEFAULT_LEEWAY_SECONDS, _aware

DEFAULT_MAX_JITTER_SECONDS = 600
"""Widest spread of token rotations (see :func:`rotation_due_at`)."""


def jitter_fraction(jitter_key: str) -> float:
    """A deterministic number in [0, 1) derived from the SHA-256 of `jitter_key`."""
    digest = hashlib.sha256(jitter_key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def rotation_due_at(
    issued_at: datetime,
    expires_at: datetime,
    rotate_before_seconds: int,
    jitter_key: str,
    *,
    max_jitter_seconds: int = DEFAULT_MAX_JITTER_SECONDS,
) -> datetime:
    """When to replace a token: `rotate_before_seconds` before it expires, moved earlier by a
    jitter derived from `jitter_key` (for example the AgentInstance uid), so that many
    tokens issued together do not all rotate in the same second.

    The jitter is within `[0, window)` where `window` is the smaller of `max_jitter_seconds`
    and a tenth of the time between issue and the unjittered due time; so a token is never
    rotated later than asked, nor in the first nine tenths of that time. A due time at or
    before `issued_at` (a rotation window as long as the token's life) is `issued_at`.
    """
    _aware(issued_at, "issued_at")
    _aware(expires_at, "expires_at")
    if rotate_before_seconds < 0 or max_jitter_seconds < 0:
        raise ValueError("rotate_before_seconds and max_jitter_seconds must be >= 0")
    base = expires_at - timedelta(seconds=rotate_before_seconds)
    if base <= issued_at:
        return issued_at
    window = min(float(max_jitter_seconds), (base - issued_at).total_seconds() / 10)
    return base - timedelta(seconds=window * jitter_fraction(jitter_key))


K = TypeVar("K")


@dataclass(frozen=True)
class KeyRetention(Generic[K]):
    """Which signing keys to publish and which can go.

    `current` is the newest key (the one to sign with); `publish` lists it first and then
    every retired key that may still have signed an unexpired token, newest first;
    `drop` lists the keys no unexpired token can name; `next_drop_at` is when the oldest
    published retired key can go (None when only the current key is published).
    """

    current: K
    publish: tuple[K, ...]
    drop: tuple[K, ...]
    next_drop_at: datetime | None


def key_retention(
    keys_with_created_at: Iterable[tuple[K, datetime]],
    longest_token_ttl: timedelta | int,
    now: datetime,
    *,
    leeway_seconds: int = DEFAULT_LEEWAY_SECONDS,
) -> KeyRetention[K]:
    """Decide which signing keys must stay in the published key set.

    A key signs tokens from its creation until the next key is created (its retirement);
    the last token it signed expires at most `longest_token_ttl` (plus the verifier's
    leeway) after that. So a retired key is published until then, and dropped after.
    Keys created at the same instant keep their input order (the later one is newer).
    """
    entries = [(key, _aware(created, "created_at")) for key, created in keys_with_created_at]
    if not entries:
        raise ValueError("there must be at least one signing key")
    ttl = (
        longest_token_ttl
        if isinstance(longest_token_ttl, timedelta)
        else timedelta(seconds=longest_token_ttl)
    )
    horizon = ttl + timedelta(seconds=leeway_seconds)
    _aware(now, "now")
    ordered = sorted(enumerate(entries), key=lambda item: (item[1][1], item[0]), reverse=True)
    newest = [entry for _, entry in ordered]
    current = newest[0][0]
    publish: list[K] = [current]
    drop: list[K] = []
    next_drop_at: datetime | None = None
    for (key, _created), (_newer, retired_at) in zip(newest[1:], newest, strict=False):
        last_expiry = retired_at + horizon
        if now < last_expiry:
            publish.append(key)
            next_drop_at = last_expiry if next_drop_at is None else min(next_drop_at, last_expiry)
        else:
            drop.append(key)
    return KeyRetention(
        current=current, publish=tuple(publish), drop=tuple(drop), next_drop_at=next_drop_at
    )
