"""Failed-login throttling, per username and per client address, in the process's memory.

`LoginThrottle.check` runs before the password is verified: a username with
`login_max_failures_per_user` failures inside the window, or a client address with
`login_max_failures_per_client`, is refused (429 `login_throttled` with `Retry-After`:
the seconds until its oldest counted failure ages out) without spending a password
hash. Only failures count, so another user signing in from the same address is
refused only once that address itself is over its own limit. A success clears the
username's failures. `failed` answers which limits the failure has just reached, so
the caller can write one audit entry when a lockout starts instead of one per guess.

The counters live in memory: several replicas of the platform each count their own
(the effective limit is the limit times the replicas); a restart forgets them. The
number of tracked keys is bounded (the oldest are dropped first).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from platform_api.errors import PlatformError

MAX_TRACKED = 50_000


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


class _Counter:
    """Failure times per key inside a sliding window."""

    def __init__(self, limit: int, window: float) -> None:
        self.limit = limit
        self.window = window
        self._times: dict[str, deque[float]] = {}

    def _live(self, key: str, now: float) -> deque[float] | None:
        times = self._times.get(key)
        if times is None:
            return None
        while times and times[0] <= now - self.window:
            times.popleft()
        if not times:
            del self._times[key]
            return None
        return times

    def retry_after(self, key: str, now: float) -> int | None:
        """Seconds until `key` is below its limit again; None when it is already."""
        times = self._live(key, now)
        if times is None or len(times) < self.limit:
            return None
        return max(1, math.ceil(times[-self.limit] + self.window - now))

    def add(self, key: str, now: float) -> bool:
        """Count a failure; True when it is the one that reaches the limit."""
        times = self._live(key, now)
        if times is None:
            if len(self._times) >= MAX_TRACKED:
                self._times.pop(next(iter(self._times)))
            times = self._times[key] = deque(maxlen=self.limit)
        times.append(now)
        return len(times) == self.limit

    def clear(self, key: str) -> None:
        self._times.pop(key, None)


class LoginThrottle:
    """The per-username and per-client failure counters of one process."""

    def __init__(self, limits: Limits, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.users = _Counter(limits.per_user, limits.window)
        self.clients = _Counter(limits.per_client, limits.window)

    def check(self, username: str, client: str) -> None:
        """Raise `LoginThrottled` when the client or the username is over its limit."""
        now = self.clock()
        wait = self.clients.retry_after(client, now)
        if wait is not None:
            raise LoginThrottled(wait, "client")
        wait = self.users.retry_after(username, now)
        if wait is not None:
            raise LoginThrottled(wait, "username")

    def failed(self, username: str, client: str) -> list[str]:
        """Count a failure of both keys; the scopes whose lockout it starts."""
        now = self.clock()
        started = []
        if self.users.add(username, now):
            started.append("username")
        if self.clients.add(client, now):
            started.append("client")
        return started

    def succeeded(self, username: str) -> None:
        """A right password: the username's failures are forgotten."""
        self.users.clear(username)
