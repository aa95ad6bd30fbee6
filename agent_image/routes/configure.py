"""`POST /v1/configure`: hot reload of prompt, model, tools, threshold (UC-17)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from agent_image.commands import ConfigureRequest, ValidationFailed, parse
from agent_image.routes.deps import RuntimeDep, Signed

router = APIRouter(prefix="/v1", tags=["configure"])


@router.post("/configure")
async def configure(raw: Signed, rt: RuntimeDep) -> dict[str, Any]:
    """Hot reload (UC-17): the given prompt, model, tools, threshold, ... override the
    ConfigMap's until `reset` or a restart; emits `config.applied` with the hash."""
    body = parse(ConfigureRequest, raw)
    changes = body.changes()
    if not changes and not body.reset:
        raise ValidationFailed("nothing to configure")
    rt.overlay.apply(changes, reset=body.reset, by=body.by)
    config = await rt.announce_config(
        "configure", changed=sorted(changes), reset=body.reset, by=body.by
    )
    return {
        "configHash": config.config_hash,
        "config": dict(config.data),
        "overlay": rt.overlay.values,
    }
