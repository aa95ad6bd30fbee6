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
import heapq
import hmac
import itertools
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
    """Password hashing and verification on `workers` threads of its own, at most
    `workers` at once; waiting callers take turns by priority (0 before 1), first come
    first served within one: a sign-in from an address without failures lately passes
    the queue of a guesser's attempts."""

    def __init__(self, workers: int) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="password")
        self._free = workers
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    async def verify(self, encoded: str | None, password: str, priority: int = 0) -> bool:
        """`verify_password` on one of the checker's threads, once it is this call's turn."""
        await self._turn(priority)
        try:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._pool, verify_password, encoded, password)
        finally:
            self._pass_on()

    async def _turn(self, priority: int) -> None:
        if self._free > 0 and not self._waiting:
            self._free -= 1
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (priority, next(self._order), turn))
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self._pass_on()  # given the turn as it was cancelled: hand it on
            raise

    def _pass_on(self) -> None:
        while self._waiting:
            _, _, turn = heapq.heappop(self._waiting)
            if not turn.done():
                turn.set_result(None)
                return
        self._free += 1

    def close(self) -> None:
        """Stop the threads; hashes queued but not started are dropped."""
        self._pool.shutdown(wait=False, cancel_futures=True)
