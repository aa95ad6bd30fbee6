"""The operator's queue of full reconciles: in the order asked, a key at most once at a time,
at most `workers` at once, the latest event's item used, a deleted object's work dropped;
and the org namespaces' labels it keeps from the watch instead of reading them."""

from __future__ import annotations

import asyncio

from agent_operator.workqueue import Key, WorkQueue


class Recorder:
    """A `run` that records what it worked on, and how many ran at once; each run waits
    for `release` when one is given."""

    def __init__(self, release: asyncio.Event | None = None) -> None:
        self.done: list[tuple[Key, str]] = []
        self.running = 0
        self.most = 0
        self.release = release

    async def __call__(self, key: Key, item: str) -> None:
        self.running += 1
        self.most = max(self.most, self.running)
        if self.release is not None:
            await self.release.wait()
        await asyncio.sleep(0)
        self.running -= 1
        self.done.append((key, item))


async def _drain(queue: WorkQueue[str], recorder: Recorder, count: int) -> None:
    for _ in range(1000):
        if len(recorder.done) >= count and not len(queue):
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"only {recorder.done} of {count} done")


def test_keys_are_worked_in_order_with_at_most_the_workers_at_once() -> None:
    async def scenario() -> Recorder:
        recorder = Recorder()
        queue: WorkQueue[str] = WorkQueue(recorder, workers=3)
        for i in range(10):
            queue.add((f"org-{i}", "agent"), f"event-{i}")
        queue.start()
        await _drain(queue, recorder, 10)
        await queue.stop()
        return recorder

    recorder = asyncio.run(scenario())
    assert [key for key, _ in recorder.done] == [(f"org-{i}", "agent") for i in range(10)]
    assert recorder.most == 3


def test_a_queued_key_is_worked_once_with_its_latest_item() -> None:
    async def scenario() -> Recorder:
        recorder = Recorder()
        queue: WorkQueue[str] = WorkQueue(recorder, workers=2)
        queue.add(("org-a", "agent"), "first")
        queue.add(("org-b", "agent"), "only")
        queue.add(("org-a", "agent"), "second")
        assert len(queue) == 2
        queue.start()
        await _drain(queue, recorder, 2)
        await queue.stop()
        return recorder

    recorder = asyncio.run(scenario())
    assert recorder.done == [(("org-a", "agent"), "second"), (("org-b", "agent"), "only")]


def test_a_key_added_while_worked_runs_again_after_never_alongside() -> None:
    async def scenario() -> Recorder:
        release = asyncio.Event()
        recorder = Recorder(release)
        queue: WorkQueue[str] = WorkQueue(recorder, workers=4)
        queue.start()
        queue.add(("org-a", "agent"), "first")
        await asyncio.sleep(0.01)  # the first run has started and waits
        queue.add(("org-a", "agent"), "second")
        queue.add(("org-a", "agent"), "third")
        await asyncio.sleep(0.01)
        assert recorder.running == 1  # four workers, yet the key is not worked twice
        release.set()
        await _drain(queue, recorder, 2)
        await asyncio.sleep(0.01)
        await queue.stop()
        return recorder

    recorder = asyncio.run(scenario())
    assert recorder.done == [(("org-a", "agent"), "first"), (("org-a", "agent"), "third")]
    assert recorder.most == 1


def test_a_discarded_key_is_not_worked_and_a_failing_run_keeps_the_worker() -> None:
    async def scenario() -> list[str]:
        seen: list[str] = []

        async def run(key: Key, item: str) -> None:
            seen.append(item)
            if item == "boom":
                raise RuntimeError("the API server said no")

        queue: WorkQueue[str] = WorkQueue(run, workers=1)
        queue.add(("org-a", "agent"), "boom")
        queue.add(("org-b", "agent"), "deleted meanwhile")
        queue.add(("org-c", "agent"), "after")
        queue.discard(("org-b", "agent"))
        queue.start()
        for _ in range(1000):
            if len(seen) >= 2:
                break
            await asyncio.sleep(0.001)
        await queue.stop()
        return seen

    assert asyncio.run(scenario()) == ["boom", "after"]


def test_the_served_namespaces_labels_are_kept_from_the_watch_and_forgotten() -> None:
    from agent_operator.config import OperatorSettings
    from agent_operator.state import State

    state = State(None, OperatorSettings(), None)  # type: ignore[arg-type]

    def body(name: str, *, terminating: bool = False, **labels: str) -> dict[str, object]:
        meta: dict[str, object] = {"name": name, "labels": labels}
        if terminating:
            meta["deletionTimestamp"] = "2026-12-02T14:00:00Z"
        return {"metadata": meta}

    state.namespaces.learn("org-a", "")
    state.namespaces.learn("org-b", "other")
    assert state.see_namespace("org-a", body("org-a", team="x")) is None
    assert state.see_namespace("org-b", body("org-b", team="y")) is None
    assert state.namespace_labels == {"org-a": {"team": "x"}}  # another shard's is not kept
    assert state.see_namespace("org-a", body("org-a", team="z")) == {"team": "x"}
    # leaving the watch (no body) or terminating: read again at the next reconcile
    assert state.see_namespace("org-a", None) == {"team": "z"}
    assert "org-a" not in state.namespace_labels
    state.see_namespace("org-a", body("org-a", team="z"))
    state.see_namespace("org-a", body("org-a", terminating=True, team="z"))
    assert "org-a" not in state.namespace_labels
    state.see_namespace("org-a", body("org-a", team="z"))
    state.forget_namespace("org-a")
    assert state.namespace_labels == {}
