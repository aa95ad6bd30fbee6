"""Giving back the memory the C allocator holds free (`humanwork_core.heap`).

A process that allocated and freed many blocks over 512 bytes (what CPython hands to
malloc) keeps them resident, on glibc, until `trim`. One `Trimmer` says when: at its
interval (the platform's `trim_every`; the operator's scheduler while it is busy, as under
a steady load it never goes quiet) and once quiet after the work noted."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap

import pytest

from agent_operator import handlers
from agent_operator.config import OperatorSettings
from humanwork_core import heap

FRAGMENT = textwrap.dedent(
    """
    import sys
    from humanwork_core import heap

    def rss():
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024

    kept, blocks = [], [bytes(1000 + i % 3000) for i in range(60_000)]  # ~150 MiB
    kept = blocks[::64]  # a few live blocks all through the heap: its top cannot shrink
    del blocks
    freed = rss()
    heap.trim() if sys.argv[1] == "trim" else None
    print(freed, rss())
    """
)


def _rss_after(action: str) -> tuple[int, int]:
    out = subprocess.run(
        [sys.executable, "-c", FRAGMENT, action], capture_output=True, text=True, check=True
    )
    freed, after = out.stdout.split()
    return int(freed), int(after)


@pytest.mark.skipif(not heap.trim(), reason="not glibc: no malloc_trim")
def test_trim_gives_back_what_was_freed_between_live_blocks() -> None:
    freed, untrimmed = _rss_after("none")
    assert untrimmed >= freed - 2 > 80, (freed, untrimmed)  # freed, still resident
    freed, trimmed = _rss_after("trim")
    assert freed > 80 and trimmed < freed - 60, (freed, trimmed)


async def test_trim_every_trims_at_its_interval_and_never_at_zero() -> None:
    calls: list[int] = []
    await asyncio.wait_for(heap.trim_every(0, lambda: calls.append(1)), 1)  # returns at once
    assert calls == []
    third = asyncio.Event()

    def count() -> None:
        calls.append(1)
        if len(calls) == 3:
            third.set()

    looping = asyncio.create_task(heap.trim_every(0.01, count))
    await asyncio.wait_for(third.wait(), 30)
    looping.cancel()


async def test_the_operator_trims_while_busy(monkeypatch: pytest.MonkeyPatch) -> None:
    trims: list[int] = []
    monkeypatch.setattr(heap, "_trim", lambda pad: trims.append(pad) or 1)
    monkeypatch.setattr(handlers, "SCHEDULER_TICK_SECONDS", 0.01)
    state = handlers.State(None, OperatorSettings(), None)  # type: ignore[arg-type]
    state.heap.every = 0.05
    scheduler = asyncio.create_task(handlers._schedule(state))
    try:
        async with asyncio.timeout(30):
            while len(trims) < 3:  # an event or a reconcile every 5 ms: never quiet
                state.active()
                await asyncio.sleep(0.005)
    finally:
        scheduler.cancel()


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_trimmer_trims_at_its_interval_and_once_quiet_after_work() -> None:
    clock, trims = Clock(), []
    when = heap.Trimmer(every=60, quiet=5, trimmer=lambda: trims.append(clock.now), clock=clock)
    clock.now += 30
    assert not when.tick() and when.next_in() == 30  # nothing noted: the interval only
    when.active()
    clock.now += 4
    assert not when.tick() and when.next_in() == 1
    clock.now += 1
    assert when.tick() and trims == [1035]  # quiet 5 s after the work: trimmed
    clock.now += 30
    assert not when.tick() and when.next_in() == 30  # once, not again while quiet
    for _ in range(70):  # busy: work every second, never quiet
        when.active()
        clock.now += 1
        when.tick()
    assert trims == [1035, 1095]  # still trimmed at the interval
    never = heap.Trimmer(every=0, trimmer=lambda: trims.append(0), clock=clock)
    never.active()
    clock.now += 10_000
    assert not never.tick() and never.next_in() == float("inf")
