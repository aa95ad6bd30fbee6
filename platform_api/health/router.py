"""`GET /healthz`: the service is up and its database answers (no authentication), and
whether the database was restored from a backup to a point older than its audit
checkpoints (`backup.marker`; also the metric `humanwork_platform_restored_behind`)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from platform_api.backup.marker import last_restore
from platform_api.db import Engine, Sessions
from platform_api.errors import Unavailable, error_responses
from platform_api.state import Metrics

router = APIRouter(tags=["health"])


class RestoreRead(BaseModel):
    """The database's last restore from a backup."""

    restored_at: datetime
    backup_taken_at: datetime
    behind: bool = Field(
        description="the restore went back to a point older than the signed audit "
        "checkpoints: what was recorded after the backup is gone"
    )
    chains_behind: dict[str, str] = Field(description="each audit chain behind, and by what")


class Health(BaseModel):
    """The service's health."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"status": "ok", "database": "ok"}]})

    status: Literal["ok"]
    database: Literal["ok"]
    restore: RestoreRead | None = Field(
        default=None,
        description="the last restore of the database from a backup (absent: never restored)",
    )


@router.get(
    "/healthz",
    response_model=Health,
    response_model_exclude_none=True,
    summary="Health",
    description="No authentication. 503 `unavailable` when the database does not answer.",
    responses=error_responses(503),
)
async def healthz(engine: Engine, sessions: Sessions, metrics: Metrics) -> Health:
    try:
        async with engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
        async with sessions() as session:
            restored = await last_restore(session)
    except (SQLAlchemyError, OSError):
        raise Unavailable("database unreachable") from None
    restore = None
    if restored is not None:
        restore = RestoreRead(
            restored_at=restored["restored_at"],
            backup_taken_at=restored.get("backup_taken_at") or restored["restored_at"],
            behind=bool(restored.get("behind")),
            chains_behind=dict(restored.get("chains_behind") or {}),
        )
    metrics.restored_behind.set(1 if restore is not None and restore.behind else 0)
    return Health(status="ok", database="ok", restore=restore)
