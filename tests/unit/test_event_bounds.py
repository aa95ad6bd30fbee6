"""An agent event's body is read with a bound (`agent_api.events.read_bounded`): a declared
length over the limit is refused before a byte is read, a streamed body as soon as it
passes the limit, and a body within it comes back whole."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from platform_api.agent_api.events import MAX_EVENT_BYTES, read_bounded
from platform_api.errors import PayloadTooLarge


class Stream:
    """Chunks of `size` bytes, `count` times, counting what was pulled."""

    def __init__(self, size: int, count: int) -> None:
        self.size, self.count, self.pulled = size, count, 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for _ in range(self.count):
            self.pulled += self.size
            yield b"x" * self.size


async def test_a_body_past_the_limit_is_refused_as_soon_as_it_passes() -> None:
    stream = Stream(65536, 1024)
    with pytest.raises(PayloadTooLarge) as refused:
        await read_bounded({}, stream.__aiter__())
    assert refused.value.code == "payload_too_large" and refused.value.status_code == 413
    assert refused.value.details == {"limit": str(MAX_EVENT_BYTES)}
    assert stream.pulled <= MAX_EVENT_BYTES + 65536


async def test_a_declared_length_past_the_limit_is_refused_before_reading() -> None:
    stream = Stream(10, 1)
    with pytest.raises(PayloadTooLarge):
        await read_bounded({"content-length": str(MAX_EVENT_BYTES + 1)}, stream.__aiter__())
    assert stream.pulled == 0


async def test_a_body_within_the_limit_comes_back_whole() -> None:
    stream = Stream(1024, MAX_EVENT_BYTES // 1024)
    body = await read_bounded({"content-length": str(MAX_EVENT_BYTES)}, stream.__aiter__())
    assert len(body) == MAX_EVENT_BYTES
