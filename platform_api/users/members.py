"""An org's members, managed by the org's admins (`users.manage` in that org): list them,
set a member's role (within what the caller may give: `users.grants`), remove a member.

A member is found only through the org named in the path, so a user of another org is
404 as a stranger, whoever asks. A removal is in effect at the member's next request (the
principal is read from the database on each) and ends its open event streams (they read
the membership again at each look; this replica's are woken at the commit). Audited in
the org's chain: `member.role_changed`, `member.removed`.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.access.principal import OrgScope
from platform_api.accounts.repository import UserRepository
from platform_api.audit.service import record
from platform_api.errors import NotFound
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


async def set_role(session: AsyncSession, scope: OrgScope, username: str, role: str) -> Member:
    """Give the member `role` in the org."""
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
