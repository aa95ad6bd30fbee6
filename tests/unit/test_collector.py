"""The garbage collector tuned for serving (`humanwork_core.collector`): the youngest
generation collected every `YOUNG` allocations, the older ones as Python has them, and the
platform's `serve` command tuned so before it serves (docs/performance.md, "The garbage
collector's share")."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from humanwork_core import collector

# The platform's command line in a process of its own, its server's run replaced by a
# report of the collector's thresholds before and as it would serve (nothing is served).
SERVE = """
import gc, json, uvicorn
from platform_api import main
before = gc.get_threshold()
uvicorn.Server.run = lambda self: print(json.dumps([before, gc.get_threshold()]))
main.main(["serve", "--host", "127.0.0.1", "--port", "1"])
"""


@pytest.fixture
def thresholds() -> Iterator[None]:
    saved = gc.get_threshold()
    yield
    gc.set_threshold(*saved)


def test_tune_raises_the_youngest_threshold_and_keeps_the_older_ones(thresholds: None) -> None:
    gc.set_threshold(700, 11, 12)
    collector.tune()
    assert gc.get_threshold() == (collector.YOUNG, 11, 12)
    collector.tune(2_000)
    assert gc.get_threshold() == (2_000, 11, 12)


def test_the_platforms_serve_command_tunes_the_collector_before_serving() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUMANWORK_")}
    done = subprocess.run(
        [sys.executable, "-c", SERVE], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    before, serving = json.loads(done.stdout.strip().splitlines()[-1])
    assert before[0] == 700  # Python's own until the command runs
    assert serving == [collector.YOUNG, before[1], before[2]]
