"""`POST /orgs/{org_id}/deactivate` (capability `orgs.manage` in the org, or a platform
administrator) and `POST /orgs/{org_id}/reactivate` (a platform administrator only: a
deactivation is the platform's lever over an org, which the org's own admins cannot
undo). See `platform_api.deactivation.service`."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter

from platform_api.agents.commands import require_kube
from platform_api.agents.manage import org_of
from platform_api.auth.dependencies import (
    require_in_org_or_platform_admin,
    require_platform_admin,
)
from platform_api.db import Session, Sessions, release
from platform_api.deactivation import service
from platform_api.deactivation.schemas import DeactivateBody, OrgLifecycle, ReactivateBody
from platform_api.errors import error_responses
from platform_api.floor.principal import OrgScope, Principal
from platform_api.state import MaybeKube

router = APIRouter(prefix="/orgs/{org_id}", tags=["orgs"])
Admin = Annotated[OrgScope, require_in_org_or_platform_admin("orgs.manage")]
PlatformAdmin = Annotated[Principal, require_platform_admin()]


@router.post(
    "/deactivate",
    summary="Deactivate an org",
    description="Capability `orgs.manage` in the org, or a platform administrator. At "
    "once: the org's agent tokens are refused "
    "(401 `token_revoked`, reason `org_deactivated`), its users' changes, plan requests and "
    "decisions are refused (409 `org_deactivated`). Then every open task is cancelled with "
    "the reason and every AgentInstance deleted (its spec kept for a reactivation). The "
    "audit log, the archive and the org's reads stay available. Running it again finishes "
    "a teardown that failed half-way. Audited `org.deactivated`.",
    responses=error_responses(401, 403, 404, 422, 503),
)
async def deactivate(
    session: Session,
    sessions: Sessions,
    maybe_kube: MaybeKube,
    scope: Admin,
    body: DeactivateBody | None = None,
) -> OrgLifecycle:
    kube = require_kube(maybe_kube, "deactivating an org")
    org = await org_of(session, scope.org_id)
    reason = (body or DeactivateBody()).reason
    await release(session)  # the mark takes a transaction of its own: hold none meanwhile
    return await service.deactivate(session, sessions, kube, org, scope.principal.username, reason)


@router.post(
    "/reactivate",
    summary="Reactivate an org",
    description="Platform administrators only (403 `platform_admin_required`; the org's "
    "own admins cannot undo a deactivation); 404 for no such org. The org takes work "
    "again; with `restoreAgents` "
    "(the default) the agents its deactivation deleted are created again from their kept "
    "specs (new tokens, new secrets). Cancelled tasks stay cancelled. 409 `conflict` for an "
    "active org. Audited `org.reactivated`.",
    responses=error_responses(401, 403, 404, 409, 422, 503),
)
async def reactivate(
    org_id: uuid.UUID,
    session: Session,
    maybe_kube: MaybeKube,
    admin: PlatformAdmin,
    body: ReactivateBody | None = None,
) -> OrgLifecycle:
    org = await org_of(session, org_id)
    restore = (body or ReactivateBody()).restoreAgents
    return await service.reactivate(session, maybe_kube, org, admin.username, restore)
