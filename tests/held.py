"""Holding a fake upstream's request where it arrived, for tests that must act while a
call is in flight (kill the caller in the middle of a side effect, for instance).

    held = HeldRequest(world.shop, "inventory_levels/adjust")
    ...                          # something makes the call
    held.wait_arrived(60)        # the request reached the fake; nothing applied yet
    ...                          # act while it is held
    held.release()               # the fake handles it now

The first request whose path contains `path_contains` is held in front of the fake's app
(before the fake reads it, so before any side effect) until `release()`; later ones pass.
A test therefore never guesses with a sleep whether the call reached the upstream.
"""

from __future__ import annotations

import asyncio
import threading

from humanwork_dev.fakes.server import ASGIApp, FakeUpstream, Receive, Scope, Send

RELEASE_TIMEOUT = 300.0
"""How long a held request waits at most (a test that forgot to release fails, not hangs)."""


class HeldRequest:
    """Holds the first matching request of `fake` until `release()`; see the module."""

    def __init__(self, fake: FakeUpstream, path_contains: str) -> None:
        self.path_contains = path_contains
        self._arrived = threading.Event()
        self._released = threading.Event()
        self._taken = False
        self._lock = threading.Lock()
        self._inner: ASGIApp = fake._app
        fake._app = self._asgi

    def _take(self, scope: Scope) -> bool:
        if scope["type"] != "http" or self.path_contains not in scope["path"]:
            return False
        with self._lock:
            if self._taken:
                return False
            self._taken = True
        return True

    async def _asgi(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._take(scope):
            self._arrived.set()
            await asyncio.to_thread(self._released.wait, RELEASE_TIMEOUT)
        await self._inner(scope, receive, send)

    @property
    def arrived(self) -> bool:
        """Whether the held request reached the fake."""
        return self._arrived.is_set()

    def wait_arrived(self, timeout: float) -> None:
        """Return once the request reached the fake; fail after `timeout` seconds."""
        if not self._arrived.wait(timeout):
            raise AssertionError(
                f"no request to {self.path_contains!r} reached the fake within {timeout}s"
            )

    def release(self) -> None:
        """Let the held request (and any later one) through to the fake."""
        self._released.set()
