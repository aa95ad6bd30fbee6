"""`GET /tools`: the action catalog (humanwork_core.catalog) for clients: every tool, its
actions, their parameters' JSON schema, read or side effect, and the minimum risk a step
calling the action carries (a plan may declare more, never less)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter
from pydantic import BaseModel, Field

from humanwork_core import catalog
from platform_api.auth.dependencies import require
from platform_api.errors import error_responses
from platform_api.floor.principal import Principal

router = APIRouter(tags=["tools"])


class CatalogAction(BaseModel):
    """One action of a tool."""

    name: str
    sideEffect: bool = Field(description="true when the action changes the upstream")
    minRisk: str = Field(description="the least risk a step calling it carries")
    retrySafe: bool = Field(
        description="true when an expert may retry a failed step calling it (reads, and "
        "writes that set an absolute value)"
    )
    description: str
    parameters: dict[str, Any] = Field(description="JSON schema of the action's params")


class CatalogTool(BaseModel):
    """One tool of the catalog."""

    name: str
    aliases: list[str]
    integrationType: str
    description: str
    actions: list[CatalogAction]


@router.get(
    "/tools",
    response_model=list[CatalogTool],
    summary="The action catalog",
    description="Capability `tasks.read`. Every tool and action the platform's tool proxy "
    "runs, with its parameters, whether it has a side effect, and its minimum risk.",
    responses=error_responses(401, 403),
)
async def list_tools(
    principal: Annotated[Principal, require("tasks.read")],
) -> list[CatalogTool]:
    return [CatalogTool.model_validate(t.to_dict()) for t in catalog.TOOLS.values()]
