"""The agent's HTTP API (FastAPI) and its lifetime.

Commands from the platform (seed 002 section 4.2), each verified with the instance's
HMAC secret (see :mod:`agent_image.commands`), served by the routers of
:mod:`agent_image.routes`:

    POST /v1/chat                 draft a reply: reply, confidence, risk_level, flag_for_review
    POST /v1/chat/stream          the same as Server-Sent Events, tokens as they come
    POST /v1/tasks                plan a request into an AgenticTask in the agent's namespace
    POST /v1/tasks/{id}/cancel    stop working on a task (see `routes.tasks.cancel_task`)
    POST /v1/configure            hot reload of prompt, model, tools, threshold (overlay)
    POST /v1/corrections          expert corrections into the local few-shot store
    GET  /v1/health               liveness/readiness and the configuration hash (open)
    GET  /v1/status               identity, model, running tasks, uptime (open)

Prometheus metrics (:mod:`agent_image.metrics`) are served on a port of their own,
`HUMANWORK_AGENT_METRICS_PORT` (0: off), never on this API's port.

:class:`~agent_image.runtime.Runtime` holds everything the agent works with, once, on the
app's state; `create_app(settings, background=...)` starts each background job
`job(runtime)` with the app (the executor of approved steps is one; see :data:`BACKGROUND`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from fastapi import FastAPI

from agent_image.commands import install_error_handlers
from agent_image.executor import run_executor
from agent_image.routes import ROUTERS
from agent_image.runtime import CancelRegistry, Runtime, build_runtime
from agent_image.settings import AgentSettings

__all__ = [
    "BACKGROUND",
    "BackgroundJob",
    "CancelRegistry",
    "Runtime",
    "build_runtime",
    "create_app",
]

LOG = logging.getLogger("humanwork.agent")

BackgroundJob = Callable[[Runtime], Awaitable[None]]
"""A job that runs for the app's lifetime, given the runtime (e.g. the step executor)."""

BACKGROUND: tuple[BackgroundJob, ...] = (run_executor,)
"""The background jobs `create_app` starts when none are passed: the executor of approved
steps (agent_image/executor.py)."""


async def _watch_config(runtime: Runtime) -> None:
    """Reload the ConfigMap's file when the kubelet updates it; tell the platform."""
    while True:
        await asyncio.sleep(runtime.settings.config_poll_seconds)
        if runtime.holder.reload():
            await runtime.announce_config("configmap")


async def _guard(name: str, job: BackgroundJob, runtime: Runtime) -> None:
    """Run a background job; when it stops on an error, log it and tell the platform."""
    try:
        await job(runtime)
    except asyncio.CancelledError:
        raise
    except Exception:
        LOG.exception("background job %s stopped", name)
        await runtime.events.emit("error", payload={"code": "background_job_failed", "job": name})


def _start(rt: Runtime, jobs: Sequence[BackgroundJob]) -> list[asyncio.Task[None]]:
    """The configuration watcher, the event outbox and every background job, started."""
    running = [
        asyncio.create_task(_watch_config(rt), name="config-watch"),
        asyncio.create_task(rt.events.run(rt.settings.event_outbox_seconds), name="outbox"),
    ]
    # --- background jobs: the executor of approved steps runs here -------------------------
    for job in jobs:
        name = getattr(job, "__name__", repr(job))
        running.append(asyncio.create_task(_guard(name, job, rt), name=name))
    return running


async def _stop(rt: Runtime, running: list[asyncio.Task[None]]) -> None:
    """Cancel the jobs, flush the events and close the clients."""
    for task in running:
        task.cancel()
    for task in running:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
    with contextlib.suppress(Exception):
        await rt.events.flush()
    await rt.kube.aclose()
    if rt.llm is not None:
        await rt.llm.aclose()
    await rt.http.aclose()


def create_app(
    settings: AgentSettings,
    *,
    background: Sequence[BackgroundJob] | None = None,
    runtime: Runtime | None = None,
) -> FastAPI:
    """The agent's app. Nothing starts until the app does: then the configuration
    watcher, the event outbox and every `background` job (default :data:`BACKGROUND`)
    run, each as `job(runtime)`, until the app stops."""
    rt = runtime or build_runtime(settings)
    jobs = tuple(BACKGROUND if background is None else background)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        # --- metrics: on a port of their own, never the command port ----------------------
        if settings.agent_metrics_port:
            rt.metrics.serve(settings.agent_metrics_port, settings.host)
        running = _start(rt, jobs)
        try:
            yield
        finally:
            await _stop(rt, running)
            await asyncio.to_thread(rt.metrics.close)

    app = FastAPI(title="humanwork agent", version="0.1.0", lifespan=lifespan)
    app.state.runtime = rt
    install_error_handlers(app)
    for router in ROUTERS:
        app.include_router(router)
    return app
