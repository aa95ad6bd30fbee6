"""Failed-sign-in throttling in the database: per username and client address together,
with looser ceilings per username and per address, backing off rather than locking.

Three keys count every attempt: the pair (username, address), the username and the
address. A key with its limit of failures inside the window backs off: its next attempt
must wait `backoff` seconds after its newest failure, doubled for each failure past the
limit (at most the window), or is refused with 429 `login_throttled` and `Retry-After`,
before any password is checked. So a guesser slows down exponentially while the owner of
the account, signing in from another address, is not held back by the guesser's pair;
the per-username ceiling (against guessing from many addresses) does not hold back an
address that has no failure for that username lately, and the per-address ceiling
stops one address spraying many usernames.

`LoginThrottle.begin` is the check and the count in one transaction: it takes a
transaction-scoped advisory lock on each key (PostgreSQL; SQLite serialises writers on
its own), reads the keys' counts, and counts the attempt before its password is
verified. N parallel guesses therefore see each other: exactly the limit get through.
The counted rows are written in the caller's transaction, which commits (releasing the
connection) before the password is hashed; `succeeded` then forgets the pair's failures
(and those attempts' rows of the other two keys) and the attempt's own rows, in a
transaction of its own. Every replica counts the same
rows; rows older than the window are deleted as new attempts come.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import and_, delete, func, or_, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.errors import PlatformError
from platform_api.models import LoginFailure

PAIR, USERNAME, CLIENT = "pair", "username", "client"
KEY_LENGTH = 320
MAX_DOUBLINGS = 30
CLEANUP_BATCH = 500


class LoginThrottled(PlatformError):
    """Too many failed sign-ins for this username from this client (or for this username,
    or from this client, overall); retry after `details.retryAfterSeconds` (also the
    `Retry-After` header)."""

    code = "login_throttled"
    status_code = 429

    def __init__(self, retry_after: int, scope: str) -> None:
        super().__init__(
            "too many failed logins; try again later",
            retryAfterSeconds=str(retry_after),
            scope=scope,
        )
        # the generic error handler sends these headers; this one carries its own value
        self.__dict__["headers"] = {"Retry-After": str(retry_after)}


@dataclass(frozen=True)
class Limits:
    """How many failures per key within `window` seconds before it backs off, and the
    first back-off in seconds."""

    per_pair: int
    per_user: int
    per_client: int
    window: float
    backoff: float


@dataclass(frozen=True)
class Attempt:
    """A sign-in attempt counted before its password is checked: its rows, and the
    scopes whose limit it reaches should it fail."""

    username: str
    client: str
    ids: tuple[int, ...]
    reaches: tuple[str, ...]
    suspect: bool = False
    """Whether this username from this address, or this address, failed lately: its
    password is checked after the others waiting."""


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _keys(username: str, client: str) -> list[tuple[str, str]]:
    """The attempt's keys: the pair (the address never holds a space), the username and
    the address."""
    return [
        (PAIR, f"{client} {username}"[:KEY_LENGTH]),
        (USERNAME, username[:KEY_LENGTH]),
        (CLIENT, client[:KEY_LENGTH]),
    ]


def _lock_id(scope: str, key: str) -> int:
    digest = hashlib.blake2b(f"{scope}\0{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


Counts = dict[tuple[str, str], tuple[int, datetime]]


class LoginThrottle:
    """The failure counts of the three keys, shared by every replica."""

    def __init__(self, limits: Limits, clock: Callable[[], datetime] = _utcnow) -> None:
        self.limits = limits
        self.clock = clock

    def _limit(self, scope: str) -> int:
        return {PAIR: self.limits.per_pair, USERNAME: self.limits.per_user}.get(
            scope, self.limits.per_client
        )

    def wait(self, scope: str, count: int, newest: datetime, now: datetime) -> int | None:
        """Seconds a key with `count` failures (the newest at `newest`) must still wait;
        None when it may try now."""
        limit = self._limit(scope)
        if count < limit:
            return None
        delay = min(
            self.limits.backoff * 2 ** min(count - limit, MAX_DOUBLINGS), self.limits.window
        )
        remaining = (newest + timedelta(seconds=delay) - now).total_seconds()
        return math.ceil(remaining) if remaining > 0 else None

    async def _lock(self, session: AsyncSession, keys: list[tuple[str, str]]) -> None:
        """Serialise the attempts sharing a key (one lock order: no deadlock)."""
        if session.get_bind().dialect.name != "postgresql":
            return
        for lock in sorted({_lock_id(scope, key) for scope, key in keys}):
            await session.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": lock})

    async def _counts(
        self, session: AsyncSession, keys: list[tuple[str, str]], since: datetime
    ) -> Counts:
        rows = await session.execute(
            select(LoginFailure.scope, LoginFailure.key, func.count(), func.max(LoginFailure.at))
            .where(
                or_(*(and_(LoginFailure.scope == s, LoginFailure.key == k) for s, k in keys)),
                LoginFailure.at > since,
            )
            .group_by(LoginFailure.scope, LoginFailure.key)
        )
        return {(scope, key): (count, newest) for scope, key, count, newest in rows}

    async def _forget_old(self, session: AsyncSession, since: datetime) -> None:
        """Delete up to CLEANUP_BATCH rows older than the window, skipping rows another
        attempt is deleting: the cleanup never waits, so it never deadlocks."""
        old = (
            select(LoginFailure.id)
            .where(LoginFailure.at <= since)
            .limit(CLEANUP_BATCH)
            .with_for_update(skip_locked=True)
        )
        await session.execute(delete(LoginFailure).where(LoginFailure.id.in_(old)))

    async def begin(self, session: AsyncSession, username: str, client: str) -> Attempt:
        """Check the attempt's keys and count it, in `session`'s transaction (committed by
        the caller before the password is checked); `LoginThrottled` when a key must
        still wait, and then nothing is counted."""
        now = self.clock()
        keys = _keys(username, client)
        await self._lock(session, keys)
        since = now - timedelta(seconds=self.limits.window)
        await self._forget_old(session, since)
        counts = await self._counts(session, keys, since)
        clean = keys[0] not in counts  # no failure of this username from this address
        for scope, key in (keys[0], keys[2], keys[1]):
            if scope == USERNAME and clean:
                continue
            count, newest = counts.get((scope, key), (0, now))
            wait = self.wait(scope, count, newest, now)
            if wait is not None:
                raise LoginThrottled(wait, scope)
        rows = [LoginFailure(scope=scope, key=key, at=now) for scope, key in keys]
        session.add_all(rows)
        await session.flush()
        reaches = tuple(
            scope
            for scope, key in keys
            if counts.get((scope, key), (0, now))[0] + 1 == self._limit(scope)
        )
        suspect = not clean or keys[2] in counts
        return Attempt(username, client, tuple(r.id for r in rows), reaches, suspect)

    async def succeeded(self, session: AsyncSession, attempt: Attempt) -> None:
        """A right password: the failures of this username from this address are
        forgotten (their rows of all three keys, matched by the instant they share) and
        the attempt's own rows; the username's and the address's other failures stay."""
        pair, user, client = _keys(attempt.username, attempt.client)
        of_pair = and_(LoginFailure.scope == pair[0], LoginFailure.key == pair[1])
        instants = select(LoginFailure.at).where(of_pair).scalar_subquery()
        await session.execute(
            delete(LoginFailure).where(
                or_(
                    *(
                        and_(LoginFailure.scope == s, LoginFailure.key == k)
                        for s, k in (user, client)
                    )
                ),
                LoginFailure.at.in_(instants),
            )
        )
        await session.execute(
            delete(LoginFailure).where(or_(LoginFailure.id.in_(attempt.ids), of_pair))
        )
