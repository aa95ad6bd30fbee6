"""Entry point of the `humanwork-agent` console script (and `python -m agent_image`)."""

from __future__ import annotations

import uvicorn

from agent_image.app import create_app
from agent_image.settings import AgentSettings
from humanwork_core import logs, tracing


def main() -> int:
    logs.configure()
    tracing.setup("humanwork-agent")
    settings = AgentSettings()  # type: ignore[call-arg]  # all from the environment
    uvicorn.run(
        create_app(settings), host=settings.host, port=settings.agent_port, log_level="info"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
