"""The agent's HTTP routes, one router per role (like the platform's): health and status,
chat, tasks (plan, cancel), configure, corrections. Each finds the agent's
:class:`agent_image.runtime.Runtime` on the app's state (:mod:`agent_image.routes.deps`)."""

from __future__ import annotations

from fastapi import APIRouter

from agent_image.routes import chat, configure, corrections, health, tasks

ROUTERS: tuple[APIRouter, ...] = (
    health.router,
    chat.router,
    tasks.router,
    configure.router,
    corrections.router,
)
"""Every router of the agent's API, in the order the app includes them."""
