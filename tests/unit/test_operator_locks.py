"""The operator's per-object locks (`agent_operator.handlers.State.lock`): two reconciles
of one object never run at once, and a lock lives only while a reconcile holds or awaits
it, so the operator keeps nothing per task it has ever reconciled (every task of the
cluster passes through `task:<namespace>`, thousands a day)."""

from __future__ import annotations

import asyncio

from agent_operator import handlers
from agent_operator.config import OperatorSettings


def _state() -> handlers.State:
    return handlers.State(None, OperatorSettings(), None)  # type: ignore[arg-type]


async def test_one_object_is_reconciled_by_one_at_a_time() -> None:
    state = _state()
    order: list[str] = []
    first_in = asyncio.Event()
    release = asyncio.Event()

    async def first() -> None:
        async with state.lock("task:org-a", "t1"):
            order.append("first in")
            first_in.set()
            await release.wait()
            order.append("first out")

    async def second() -> None:
        await first_in.wait()
        async with state.lock("task:org-a", "t1"):
            order.append("second in")

    async def other() -> None:
        await first_in.wait()
        async with state.lock("task:org-a", "t2"):  # another object: not held up
            order.append("other in")

    running = [asyncio.create_task(c()) for c in (first, second, other)]
    await first_in.wait()
    for _ in range(20):
        await asyncio.sleep(0)
    assert order == ["first in", "other in"], order  # the second waits for the first
    assert state.locks.get(("task:org-a", "t1")) is not None  # held and awaited: alive
    release.set()
    await asyncio.gather(*running)
    assert order == ["first in", "other in", "first out", "second in"]


async def test_no_lock_is_kept_once_its_reconciles_are_over() -> None:
    state = _state()
    for n in range(500):
        async with state.lock("task:org-a", f"task-{n}"):
            await asyncio.sleep(0)
        async with state.lock("org-a", f"agent-{n % 5}"):
            pass
    assert len(state.locks) == 0, f"{len(state.locks)} locks kept after their reconciles"
