"""What a caller may give and whom it may manage: the bounds of an org's admin.

- A role may be given in an org when it exists in the access map and, unless the caller
  is a platform administrator, it is marked `org.grantable` and holds no capability the
  caller's own role in that org lacks (403 `role_not_grantable`); a client's capabilities
  (`SELF_SCOPED`: its own conversations and steps) are not counted, so an org's admin
  gives the `client` role without holding them. No role holds a
  platform administrator's capability (`access_map.service` refuses such a map).
- A user may be managed (its role set, removed, deactivated, bound to an OIDC identity)
  only when it is not above the caller: a platform administrator only by another (403
  `platform_admin_required`), and, for an org's admin, no membership of the user holds a
  capability the caller's role in that org lacks (403 `role_not_grantable`).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.access_map.repository import AccessMapRepository
from platform_api.auth.dependencies import PlatformAdminRequired
from platform_api.errors import Forbidden, ValidationFailed
from platform_api.floor.capabilities import ORG_GRANTABLE, SELF_SCOPED
from platform_api.floor.principal import Principal
from platform_api.models import User


class RoleNotGrantable(Forbidden):
    """A role the caller may not give (or a user it may not manage) in an org."""

    code = "role_not_grantable"


async def ensure_grantable(
    session: AsyncSession, principal: Principal, org_id: uuid.UUID, role: str
) -> frozenset[str]:
    """The role's capabilities when the caller may give `role` in `org_id` (see the
    module docstring); 422 for a role the map lacks, 403 `role_not_grantable`."""
    capabilities = await AccessMapRepository(session).capabilities(role)
    if not capabilities:
        raise ValidationFailed("unknown role", role=role)
    if principal.platform_admin:
        return capabilities
    if ORG_GRANTABLE not in capabilities:
        raise RoleNotGrantable(
            "the platform does not let orgs give this role", role=role, orgId=str(org_id)
        )
    lacking = sorted(
        capabilities - {ORG_GRANTABLE} - SELF_SCOPED - principal.capabilities_in(org_id)
    )
    if lacking:
        raise RoleNotGrantable(
            "the role holds capabilities the caller lacks in the org",
            role=role,
            orgId=str(org_id),
            capabilities=", ".join(lacking),
        )
    return capabilities


async def ensure_manageable(
    session: AsyncSession, principal: Principal, user: User, roles: Mapping[uuid.UUID, str]
) -> None:
    """403 unless the caller may manage `user`, whose role per org is `roles` (see the
    module docstring)."""
    if principal.platform_admin:
        return
    if user.platform_admin:
        raise PlatformAdminRequired(
            "only a platform administrator may manage a platform administrator",
            username=user.username,
        )
    access = AccessMapRepository(session)
    for org_id, role in sorted(roles.items()):
        held = await access.capabilities(role)
        lacking = sorted(held - {ORG_GRANTABLE} - SELF_SCOPED - principal.capabilities_in(org_id))
        if lacking:
            raise RoleNotGrantable(
                "the user holds capabilities the caller lacks in the org",
                username=user.username,
                orgId=str(org_id),
                capabilities=", ".join(lacking),
            )
