"""A user's account as a whole: deactivate and reactivate it, make or unmake a platform
administrator.

A user is deactivated by a platform administrator, or by a caller holding `users.manage`
in every org the user belongs to (at least one) and not below it there (`users.grants`);
anyone else gets 404 as for a stranger. From the commit on, every token of the user is
refused (401 `user_deactivated`, read on each request) and its open event streams end
(they read the user again at each look; this replica's are woken at the commit). A
caller cannot deactivate itself or take its own platform administration away (409), so
a platform administrator always remains. Audited `user.deactivated`, `user.reactivated`,
`user.platform_admin_changed`.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.errors import Conflict, NotFound
from platform_api.floor.accounts import UserRepository
from platform_api.floor.audit.service import record
from platform_api.floor.principal import Principal
from platform_api.models import User
from platform_api.notify.wakeup import WAKEUP
from platform_api.users.grants import ensure_manageable
from platform_api.users.schemas import UserState


async def _target(
    session: AsyncSession, principal: Principal, username: str
) -> tuple[User, list[uuid.UUID]]:
    """The user the caller may manage as a whole, and its orgs; 404 otherwise."""
    users = UserRepository(session)
    user = await users.by_username(username)
    roles = await users.roles_of(user.id) if user is not None else {}
    if user is None:
        raise NotFound("no such user")
    if not principal.platform_admin:
        scoped = principal.holding("users.manage")
        if not roles or not set(roles) <= scoped.org_ids:
            raise NotFound("no such user")
        await ensure_manageable(session, scoped, user, roles)
    if user.id == principal.user_id:
        raise Conflict("a user cannot change its own account state", username=username)
    return user, sorted(roles)


def state_of(user: User) -> UserState:
    return UserState(
        username=user.username,
        active=user.deactivated_at is None,
        platformAdmin=user.platform_admin,
        deactivatedAt=user.deactivated_at,
    )


async def _audit(
    session: AsyncSession, actor: str, action: str, user: User, orgs: list[uuid.UUID]
) -> None:
    chains: list[uuid.UUID | None] = [*orgs, None]
    for org_id in chains:
        await record(
            session,
            actor=actor,
            action=action,
            target=f"user:{user.username}",
            org_id=org_id,
            details={"platformAdmin": user.platform_admin},
        )


async def set_active(
    session: AsyncSession, principal: Principal, username: str, active: bool
) -> UserState:
    """Deactivate (`active` false) or reactivate the user."""
    user, orgs = await _target(session, principal, username)
    if (user.deactivated_at is None) != active:
        user.deactivated_at = None if active else datetime.now(UTC)
        await session.flush()
        action = "user.reactivated" if active else "user.deactivated"
        await _audit(session, principal.username, action, user, orgs)
        WAKEUP.after_commit(session)
    return state_of(user)


async def set_platform_admin(
    session: AsyncSession, principal: Principal, username: str, value: bool
) -> UserState:
    """Make the user a platform administrator, or no longer (a platform admin's act)."""
    user, orgs = await _target(session, principal, username)
    if user.platform_admin != value:
        user.platform_admin = value
        await session.flush()
        await _audit(session, principal.username, "user.platform_admin_changed", user, orgs)
        WAKEUP.after_commit(session)
    return state_of(user)
