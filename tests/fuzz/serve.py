"""An ASGI app served for real on loopback (uvicorn in a thread, with its lifespan), so
that a fuzzer in another process or thread sends it real HTTP requests."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import uvicorn

from humanwork_dev.processes import free_port


@contextlib.contextmanager
def served(app: Any, *, lifespan: str = "on", within: float = 60) -> Iterator[str]:
    """The base URL of `app` served until the block ends."""
    server = uvicorn.Server(
        uvicorn.Config(
            app, host="127.0.0.1", port=free_port(), log_level="warning", lifespan=lifespan
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + within
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{server.config.port}"
    finally:
        server.should_exit = True
        thread.join(30)
