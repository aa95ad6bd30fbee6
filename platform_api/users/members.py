"""An org's members, managed by the org's admins (`users.manage` in that org): list them,
set a member's role (within what the caller may give: `users.grants`), remove a member.

A member is found only through the org named in the path, so a user of another org is
404 as a stranger to the org's admins; only a platform administrator (itself a member
with `users.manage` there) adds an existing user of another org by setting its role. A
removal is in effect at the member's next request (the principal is read from the
database on each) and ends its open event streams (they read the membership again at
each look; this replica's are woken at the commit). Audited in the org's chain:
`member.added`, `member.role_changed`, `member.removed`.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.errors import NotFound
from platform_api.floor.accounts import UserRepository
from platform_api.floor.audit.service import record
from platform_api.floor.principal import OrgScope
from platform_api.models import Membership, User
from platform_api.notify.wakeup import WAKEUP
from platform_api.users.grants import ensure_grantable, ensure_manageable
from platform_api.users.schemas import Member


def member_of(user: User, membership: Membership) -> Member:
    return Member(
        username=user.username,
        role=membership.role,
        active=user.deactivated_at is None,
        platformAdmin=user.platform_admin,
    )


async def list_members(session: AsyncSession, scope: OrgScope) -> list[Member]:
    """Every member of the org, by username."""
    return [member_of(u, m) for u, m in await UserRepository(session).members(scope.org_id)]


async def _found(session: AsyncSession, scope: OrgScope, username: str) -> tuple[User, Membership]:
    found = await UserRepository(session).membership(scope.org_id, username, lock=True)
    if found is None:
        raise NotFound("no such member")
    user, membership = found
    await ensure_manageable(session, scope.principal, user, {scope.org_id: membership.role})
    return user, membership


async def _joining(
    session: AsyncSession, scope: OrgScope, username: str, role: str
) -> tuple[User, Membership] | None:
    """A platform administrator adding an existing user: its new membership, else None."""
    users = UserRepository(session)
    user = await users.by_username(username) if scope.principal.platform_admin else None
    if user is None or await users.membership(scope.org_id, username) is not None:
        return None
    await ensure_grantable(session, scope.principal, scope.org_id, role)
    await users.add_memberships(user.id, [scope.org_id], role)
    await record(
        session,
        actor=scope.principal.username,
        action="member.added",
        target=f"user:{user.username}",
        org_id=scope.org_id,
        details={"role": role},
    )
    found = await users.membership(scope.org_id, username)
    assert found is not None
    return found


async def set_role(session: AsyncSession, scope: OrgScope, username: str, role: str) -> Member:
    """Give the member `role` in the org (a platform administrator: adding the user)."""
    joined = await _joining(session, scope, username, role)
    if joined is not None:
        return member_of(*joined)
    user, membership = await _found(session, scope, username)
    await ensure_grantable(session, scope.principal, scope.org_id, role)
    before = membership.role
    if before != role:
        membership.role = role
        await session.flush()
        await record(
            session,
            actor=scope.principal.username,
            action="member.role_changed",
            target=f"user:{user.username}",
            org_id=scope.org_id,
            details={"before": before, "after": role},
        )
    return member_of(user, membership)


async def remove(session: AsyncSession, scope: OrgScope, username: str) -> None:
    """Take the member out of the org."""
    user, membership = await _found(session, scope, username)
    await UserRepository(session).remove_membership(user.id, scope.org_id)
    await record(
        session,
        actor=scope.principal.username,
        action="member.removed",
        target=f"user:{user.username}",
        org_id=scope.org_id,
        details={"role": membership.role},
    )
    WAKEUP.after_commit(session)
