"""`GET /v1/health` and `GET /v1/status`: open probes (no signature)."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter

from agent_image.routes.deps import RuntimeDep

router = APIRouter(prefix="/v1", tags=["health"])


@router.get("/health")
async def health(rt: RuntimeDep) -> dict[str, Any]:
    """Liveness and readiness: the agent runs and has a configuration."""
    return {"status": "ok", "configHash": rt.config().config_hash}


@router.get("/status")
async def status(rt: RuntimeDep) -> dict[str, Any]:
    """What the agent is and does: identity, model, tasks, events and uptime."""
    config = rt.config()
    settings = rt.settings
    return {
        "agentId": settings.agent_id,
        "agentName": settings.agent_name,
        "orgId": settings.org_id,
        "namespace": settings.namespace,
        "model": config.model,
        "llm": {
            "mode": "online" if rt.gate.usable() is not None else "offline",
            "configured": rt.llm is not None,
            "lastError": rt.gate.last_error,
        },
        "configHash": config.config_hash,
        "configMapHash": rt.holder.current.config_hash,
        "overlay": bool(rt.overlay.values),
        "maxConcurrentTasks": config.max_concurrent_tasks,
        "tasks": {"running": dict(rt.tasks), "cancelled": sorted(rt.cancelled.entries)},
        "events": {
            "outbox": rt.events.outbox_size,
            "delivered": rt.events.delivered,
            "dropped": rt.events.dropped,
        },
        "corrections": len(rt.corrections),
        "uptimeSeconds": round(time.monotonic() - rt.started, 1),
    }
