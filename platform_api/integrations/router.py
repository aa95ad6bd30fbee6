"""`/orgs/{org_id}/integrations`: list configured types, store and delete credentials
(all `tools.manage`); no endpoint returns a credential."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Response, status

from platform_api.auth.dependencies import require_in_org
from platform_api.db import Session
from platform_api.errors import error_responses
from platform_api.floor.principal import OrgScope
from platform_api.integrations import service
from platform_api.integrations.crypto import Cipher
from platform_api.integrations.schemas import (
    INTEGRATION_TYPE_PATTERN,
    IntegrationPut,
    IntegrationRead,
)
from platform_api.tools.upstreams.egress import EgressDep

router = APIRouter(prefix="/orgs/{org_id}/integrations", tags=["integrations"])

IntegrationType = Annotated[str, Path(pattern=INTEGRATION_TYPE_PATTERN, examples=["shopify"])]


def _read(row: object) -> IntegrationRead:
    return IntegrationRead.model_validate(row, from_attributes=True)


@router.get(
    "",
    response_model=list[IntegrationRead],
    summary="List configured integrations",
    description="Capability `tools.manage`. Which integrations have credentials (not the "
    "credentials).",
    responses=error_responses(401, 403, 404, 422),
)
async def list_integrations(
    session: Session, scope: Annotated[OrgScope, require_in_org("tools.manage")]
) -> list[IntegrationRead]:
    return [_read(r) for r in await service.list_credentials(session, scope)]


@router.put(
    "/{integration_type}",
    response_model=IntegrationRead,
    summary="Store an integration's credentials",
    description="Capability `tools.manage`. Encrypts with AES-256-GCM (org and type bound as "
    "associated data) and stores; replaces earlier credentials. Never echoed back. URL "
    "fields (`baseUrl`, `tokenUrl`, any `...Url`; Shopify's `shopDomain`) must be https "
    "to a host on the type's allowlist, without userinfo or fragment, and resolve to public "
    "addresses only, unless `HUMANWORK_UPSTREAM_ALLOWED_ENDPOINTS` allows them: otherwise "
    "422 `integration_endpoint_refused` (details `field`, `reason`) and nothing is stored.",
    responses=error_responses(
        401,
        403,
        404,
        422,
        503,
        codes={422: ("integration_endpoint_refused", "the endpoint is not allowed")},
    ),
)
async def put_integration(
    body: IntegrationPut,
    session: Session,
    cipher: Cipher,
    egress: EgressDep,
    scope: Annotated[OrgScope, require_in_org("tools.manage")],
    integration_type: IntegrationType,
) -> IntegrationRead:
    row = await service.put_credentials(session, cipher, scope, integration_type, body, egress)
    return _read(row)


@router.delete(
    "/{integration_type}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    summary="Delete an integration's credentials",
    description="Capability `tools.manage`. 404 when the integration has no credentials.",
    responses=error_responses(401, 403, 404, 422),
)
async def delete_integration(
    session: Session,
    scope: Annotated[OrgScope, require_in_org("tools.manage")],
    integration_type: IntegrationType,
) -> Response:
    await service.delete_credentials(session, scope, integration_type)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
