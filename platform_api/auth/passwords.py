"""Memory-hard password hashing with the standard library's scrypt.

Encoded as `scrypt$n=<N>,r=<r>,p=<p>$<salt b64>$<key b64>` so that the parameters can be
raised later without invalidating stored hashes. Verification is constant-time, and
`verify_password(None, ...)` spends the same work so unknown users cannot be told apart
by timing.

`PasswordChecker` runs the hashing in a bounded thread pool of its own: a burst of
sign-ins queues for its threads (never on the event loop, never holding a database
connection), so the rest of the API keeps answering while an attacker guesses.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import os
from concurrent.futures import ThreadPoolExecutor

N, R, P = 2**15, 8, 1
KEY_LENGTH = 32
SALT_LENGTH = 16
_MAXMEM = 128 * 1024 * 1024


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text + "=" * (-len(text) % 4))


def _derive(password: str, salt: bytes, n: int, r: int, p: int, length: int) -> bytes:
    return hashlib.scrypt(password.encode(), salt=salt, n=n, r=r, p=p, maxmem=_MAXMEM, dklen=length)


def hash_password(password: str) -> str:
    """A new salted scrypt hash of `password` in the self-describing format."""
    salt = os.urandom(SALT_LENGTH)
    key = _derive(password, salt, N, R, P, KEY_LENGTH)
    return f"scrypt$n={N},r={R},p={P}${_b64(salt)}${_b64(key)}"


_DUMMY = f"scrypt$n={N},r={R},p={P}${_b64(b'0' * SALT_LENGTH)}${_b64(b'0' * KEY_LENGTH)}"


def verify_password(encoded: str | None, password: str) -> bool:
    """Whether `password` matches `encoded`; False (after equal work) when there is none."""
    target = encoded or _DUMMY
    try:
        scheme, params, salt_text, key_text = target.split("$")
        values = dict(item.split("=", 1) for item in params.split(","))
        n, r, p = int(values["n"]), int(values["r"]), int(values["p"])
        salt, key = _unb64(salt_text), _unb64(key_text)
    except (ValueError, KeyError):
        return False
    if scheme != "scrypt" or not salt or not key:
        return False
    candidate = _derive(password, salt, n, r, p, len(key))
    return hmac.compare_digest(candidate, key) and encoded is not None


class PasswordChecker:
    """Password hashing and verification on `workers` threads of its own."""

    def __init__(self, workers: int) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="password")

    async def verify(self, encoded: str | None, password: str) -> bool:
        """`verify_password` on one of the checker's threads."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, verify_password, encoded, password)

    def close(self) -> None:
        """Stop the threads; hashes queued but not started are dropped."""
        self._pool.shutdown(wait=False, cancel_futures=True)
