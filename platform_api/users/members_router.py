"""`/orgs/{org_id}/members`: an org's admins list its members, set a member's role and
remove a member (capability `users.manage` in that org; a platform administrator on any
org, member or not, so that no org is left without a way to manage it). See
`users.members`."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, status

from platform_api.auth.dependencies import require_in_org_or_platform_admin
from platform_api.db import Session
from platform_api.errors import error_responses
from platform_api.floor.principal import OrgScope
from platform_api.users import members
from platform_api.users.schemas import Member, RoleChange

router = APIRouter(prefix="/orgs/{org_id}/members", tags=["users"])

Manager = Annotated[OrgScope, require_in_org_or_platform_admin("users.manage")]
Username = Annotated[str, Path(pattern=r"^[A-Za-z0-9._@-]{1,100}$")]
BOUNDS = {403: ("role_not_grantable", "the role holds capabilities the caller lacks in the org")}


@router.get(
    "",
    response_model=list[Member],
    summary="List an org's members",
    description="Capability `users.manage` in the org (404 for an org the caller is not a "
    "member of), or a platform administrator. Each member's role in the org and whether "
    "it is active.",
    responses=error_responses(401, 403, 404, 422),
)
async def list_members(session: Session, scope: Manager) -> list[Member]:
    return await members.list_members(session, scope)


@router.put(
    "/{username}",
    response_model=Member,
    summary="Set a member's role in the org",
    description="Capability `users.manage` in the org. 404 for a user who is not a member "
    "of this org (a user of another org included); 422 for a role the access map lacks; "
    "403 `role_not_grantable` for a role the platform does not mark `org.grantable` or that "
    "holds a capability the caller's own role in the org lacks, or for a member whose role "
    "does; 403 `platform_admin_required` for a platform administrator (unless the caller "
    "is one). A platform administrator adds an existing user this way (audited "
    "`member.added`). In effect at the member's next request. Audited `member.role_changed`.",
    responses=error_responses(401, 403, 404, 422, codes=BOUNDS),
)
async def set_role(
    body: RoleChange, session: Session, scope: Manager, username: Username
) -> Member:
    return await members.set_role(session, scope, username, body.role)


@router.delete(
    "/{username}",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Remove a member from the org",
    description="Capability `users.manage` in the org; the same bounds as setting a role. "
    "From the commit on the user's requests on the org are 404 as a stranger's, and its "
    "open event streams end. Audited `member.removed`.",
    responses=error_responses(401, 403, 404, 422, codes=BOUNDS),
)
async def remove_member(session: Session, scope: Manager, username: Username) -> None:
    await members.remove(session, scope, username)
