"""The agent's HTTP API (FastAPI): health and status for now; the task loop, chat and the
platform's signed commands arrive with the agent runtime issue."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI

from agent_image.config import ConfigHolder
from agent_image.settings import AgentSettings


def create_app(settings: AgentSettings) -> FastAPI:
    """The agent's app; nothing starts until the app does."""
    holder = ConfigHolder(settings.config_file)
    started = time.monotonic()

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        watcher = asyncio.create_task(holder.watch(settings.config_poll_seconds))
        try:
            yield
        finally:
            watcher.cancel()

    app = FastAPI(title="humanwork agent", version="0.1.0", lifespan=lifespan)

    @app.get("/v1/health")
    async def health() -> dict[str, Any]:
        """Liveness and readiness: the agent runs and has a configuration."""
        return {"status": "ok", "configHash": holder.current.config_hash}

    @app.get("/v1/status")
    async def status() -> dict[str, Any]:
        """What the agent is: its identity, model, configuration and uptime."""
        return {
            "agentId": settings.agent_id,
            "orgId": settings.org_id,
            "model": holder.current.model,
            "configHash": holder.current.config_hash,
            "uptimeSeconds": round(time.monotonic() - started, 1),
        }

    return app
