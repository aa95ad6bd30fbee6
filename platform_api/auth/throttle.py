"""Failed-login throttling, per username and per client address, in the database.

`LoginThrottle.check` runs before the password is verified: a username with
`login_max_failures_per_user` failures inside the window, or a client address with
`login_max_failures_per_client`, is refused (429 `login_throttled` with `Retry-After`:
the seconds until its oldest counted failure ages out) without spending a password
hash. Only failures count, so another user signing in from the same address is
refused only once that address itself is over its own limit. A success clears the
username's failures. `failed` answers which limits the failure has just reached, so
the caller can write one audit entry when a lockout starts instead of one per guess.

The failures are rows of `login_failures`, written in a transaction of their own (a
failed login's request rolls back, the failure stays), so every replica of the platform
counts the same failures and a restart forgets none. Rows older than the window are
deleted as new failures come.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from platform_api.errors import PlatformError
from platform_api.models import LoginFailure

USERNAME, CLIENT = "username", "client"
KEY_LENGTH = 320


class LoginThrottled(PlatformError):
    """Too many failed logins for this username or from this client; retry after
    `details.retryAfterSeconds` (also the `Retry-After` header)."""

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
    """How many failures per key within `window` seconds."""

    per_user: int
    per_client: int
    window: float


def _utcnow() -> datetime:
    return datetime.now(UTC)


class LoginThrottle:
    """The per-username and per-client failure counts, shared by every replica."""

    def __init__(
        self,
        limits: Limits,
        sessions: async_sessionmaker[AsyncSession],
        clock: Callable[[], datetime] = _utcnow,
    ) -> None:
        self.limits = limits
        self.sessions = sessions
        self.clock = clock

    def _limit(self, scope: str) -> int:
        return self.limits.per_user if scope == USERNAME else self.limits.per_client

    async def _recent(
        self, session: AsyncSession, scope: str, key: str, now: datetime, extra: int = 0
    ) -> list[datetime]:
        """The key's failures inside the window, newest first, at most its limit (plus
        `extra`)."""
        since = now - timedelta(seconds=self.limits.window)
        rows = await session.scalars(
            select(LoginFailure.at)
            .where(
                LoginFailure.scope == scope,
                LoginFailure.key == key[:KEY_LENGTH],
                LoginFailure.at > since,
            )
            .order_by(LoginFailure.at.desc())
            .limit(self._limit(scope) + extra)
        )
        return list(rows)

    async def _retry_after(
        self, session: AsyncSession, scope: str, key: str, now: datetime
    ) -> int | None:
        recent = await self._recent(session, scope, key, now)
        if len(recent) < self._limit(scope):
            return None
        ages_out = recent[-1] + timedelta(seconds=self.limits.window)
        return max(1, math.ceil((ages_out - now).total_seconds()))

    async def check(self, username: str, client: str) -> None:
        """Raise `LoginThrottled` when the client or the username is over its limit."""
        now = self.clock()
        async with self.sessions() as session:
            for scope, key in ((CLIENT, client), (USERNAME, username)):
                wait = await self._retry_after(session, scope, key, now)
                if wait is not None:
                    raise LoginThrottled(wait, scope)

    async def failed(self, username: str, client: str) -> list[str]:
        """Count a failure of both keys; the scopes whose lockout it starts."""
        now = self.clock()
        started = []
        async with self.sessions() as session, session.begin():
            cutoff = now - timedelta(seconds=self.limits.window)
            await session.execute(delete(LoginFailure).where(LoginFailure.at <= cutoff))
            session.add_all(
                [
                    LoginFailure(scope=USERNAME, key=username[:KEY_LENGTH], at=now),
                    LoginFailure(scope=CLIENT, key=client[:KEY_LENGTH], at=now),
                ]
            )
            await session.flush()
            for scope, key in ((USERNAME, username), (CLIENT, client)):
                counted = await self._recent(session, scope, key, now, extra=1)
                if len(counted) == self._limit(scope):
                    started.append(scope)
        return started

    async def succeeded(self, username: str) -> None:
        """A right password: the username's failures are forgotten."""
        async with self.sessions() as session, session.begin():
            await session.execute(
                delete(LoginFailure).where(
                    LoginFailure.scope == USERNAME, LoginFailure.key == username[:KEY_LENGTH]
                )
            )
