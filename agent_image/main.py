"""Entry point of the `humanwork-agent` console script (and `python -m agent_image`)."""

from __future__ import annotations

import logging

import uvicorn

from agent_image.app import create_app
from agent_image.settings import AgentSettings


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    settings = AgentSettings()  # type: ignore[call-arg]  # all from the environment
    uvicorn.run(
        create_app(settings), host=settings.host, port=settings.agent_port, log_level="info"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
