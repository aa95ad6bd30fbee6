"""The password threads: a bounded number of hashes at once, and a sign-in from an
address without failures lately checked before the guesses already waiting."""

from __future__ import annotations

import asyncio

import pytest

from platform_api.auth import passwords
from platform_api.auth.passwords import PasswordChecker


async def test_a_clean_sign_in_passes_the_queue_of_guesses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(passwords, "N", 2**12)
    stored = passwords.hash_password("right-password-0123")
    checker = PasswordChecker(workers=1)
    done: list[str] = []

    async def check(name: str, password: str, priority: int) -> bool:
        right = await checker.verify(stored, password, priority)
        done.append(name)
        return right

    try:
        first = asyncio.create_task(check("first guess", "guess-0", 1))
        await asyncio.sleep(0)  # the first takes the only thread
        guesses = [asyncio.create_task(check(f"guess {n}", f"guess-{n}", 1)) for n in range(4)]
        await asyncio.sleep(0)
        owner = asyncio.create_task(check("owner", "right-password-0123", 0))
        assert await owner is True
        assert not any(await asyncio.gather(first, *guesses))
    finally:
        checker.close()
    assert done == ["first guess", "owner", "guess 0", "guess 1", "guess 2", "guess 3"]


async def test_a_cancelled_waiter_does_not_lose_a_thread() -> None:
    checker = PasswordChecker(workers=1)
    try:
        busy = asyncio.create_task(checker.verify(None, "x"))
        await asyncio.sleep(0)
        waiting = asyncio.create_task(checker.verify(None, "y", 1))
        await asyncio.sleep(0)
        waiting.cancel()
        assert await busy is False
        # the thread is free again: a later check is not stuck behind the cancelled one
        assert await asyncio.wait_for(checker.verify(None, "z"), timeout=60) is False
    finally:
        checker.close()
