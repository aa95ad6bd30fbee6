"""The running platform gives the memory its C allocator holds free back to the system at
`heap_trim_seconds` (a busy platform's resident memory otherwise climbs while what it
holds stays flat: docs/performance.md, "Soak")."""

from __future__ import annotations

import asyncio

import pytest
from fastapi import FastAPI

from humanwork_core import heap
from platform_api.settings import Settings
from tests.platform.conftest import make_settings


class Trims:
    """The calls of malloc_trim, and an event set at the third."""

    def __init__(self) -> None:
        self.pads: list[int] = []
        self.third = asyncio.Event()

    def __call__(self, pad: int) -> int:
        self.pads.append(pad)
        if len(self.pads) >= 3:
            self.third.set()
        return 1


@pytest.fixture
def trims(monkeypatch: pytest.MonkeyPatch) -> Trims:
    calls = Trims()
    monkeypatch.setattr(heap, "_trim", calls)
    return calls


@pytest.fixture
def settings(database_url: str, trims: Trims) -> Settings:
    return make_settings(database_url, heap_trim_seconds=0.02)


async def test_the_platform_trims_its_heap_while_it_runs(app: FastAPI, trims: Trims) -> None:
    await asyncio.wait_for(trims.third.wait(), 30)
    assert trims.pads[:3] == [0, 0, 0]  # malloc_trim(0): every free page, not only the top
    assert "heap-trim" in {t.get_name() for t in asyncio.all_tasks()}
