"""`GET /agentic/tasks/{namespace}/{name}/receipts` (tasks.read, the task's org only) and
`GET /v1/receipt-keys` (public): the signed receipts of a task's side effects and the key
set they verify against."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path

from platform_api.auth.dependencies import require
from platform_api.db import Session
from platform_api.errors import error_responses
from platform_api.floor.principal import Principal
from platform_api.tools import receipts
from platform_api.tools.receipts import Receipts

router = APIRouter(tags=["receipts"])

NAMESPACE_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
NAME_PATTERN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"


@router.get(
    "/agentic/tasks/{namespace}/{name}/receipts",
    summary="The signed receipts of a task's tool calls",
    description="Capability `tasks.read`, in the task's org (404 `not_found` otherwise). "
    "One receipt per call of the task that reached an upstream and was answered, oldest "
    "first, each as the tool proxy returned it (`humanwork.io/tool-receipt/v1`, signed "
    "with Ed25519; `kubectl humanwork receipt verify` checks one against "
    "`GET /v1/receipt-keys`).",
    responses=error_responses(401, 403, 404, 422),
)
async def list_receipts(
    namespace: Annotated[str, Path(max_length=63, pattern=NAMESPACE_PATTERN)],
    name: Annotated[str, Path(max_length=253, pattern=NAME_PATTERN)],
    session: Session,
    principal: Annotated[Principal, require("tasks.read")],
) -> dict[str, list[dict[str, Any]]]:
    return {"items": await receipts.task_receipts(session, principal, namespace, name)}


@router.get(
    "/v1/receipt-keys",
    summary="The key set receipts verify against",
    description="No authentication (public keys only). The JWK set (RFC 7517, Ed25519) of "
    "the key that signs the tool proxy's receipts and of the retired keys whose receipts "
    "still verify; an empty set when no receipt key is configured (calls then get no "
    "receipt).",
)
async def receipt_keys(signer: Receipts) -> dict[str, list[dict[str, str]]]:
    return {"keys": []} if signer is None else signer.published()
