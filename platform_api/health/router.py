"""`GET /healthz`: the service is up and its database answers (no authentication)."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from platform_api.errors import Unavailable, error_responses
from platform_api.state import PlatformDep

router = APIRouter(tags=["health"])


class Health(BaseModel):
    """The service's health."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"status": "ok", "database": "ok"}]})

    status: Literal["ok"]
    database: Literal["ok"]


@router.get(
    "/healthz",
    response_model=Health,
    summary="Health",
    description="No authentication. 503 `unavailable` when the database does not answer.",
    responses=error_responses(503),
)
async def healthz(platform: PlatformDep) -> Health:
    try:
        async with platform.engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
    except (SQLAlchemyError, OSError):
        raise Unavailable("database unreachable") from None
    return Health(status="ok", database="ok")
