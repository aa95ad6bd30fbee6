"""User use cases: create a user (in orgs where the caller holds `users.manage`, with a
role it may give there: `users.grants`), bind an OIDC identity, bootstrap the first
platform administrator (`me` describes the caller)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.auth.dependencies import PlatformAdminRequired
from platform_api.auth.passwords import hash_password
from platform_api.errors import Conflict, NotFound
from platform_api.floor.accounts import UserRepository
from platform_api.floor.audit.service import record
from platform_api.floor.principal import Principal
from platform_api.models import User
from platform_api.users.grants import ensure_grantable, ensure_manageable
from platform_api.users.schemas import OidcIdentity, UserCreate, UserRead

log = logging.getLogger(__name__)

ADMIN_USERNAME = "admin"


async def create_user(session: AsyncSession, principal: Principal, body: UserCreate) -> UserRead:
    """Create a user in some of the caller's orgs (`principal` is narrowed to those
    where it holds `users.manage`); a user of no org only by a platform administrator."""
    org_ids = sorted(set(body.org_ids))  # one lock order for the audit chain heads
    if any(o not in principal.org_ids for o in org_ids):
        raise NotFound("no such org")
    if not org_ids and not principal.platform_admin:
        raise PlatformAdminRequired("a user of no org is created by a platform administrator")
    # a user of no org: only the role's existence is checked (the caller is a platform
    # administrator, who may give any role)
    for target in org_ids or [uuid.UUID(int=0)]:
        await ensure_grantable(session, principal, target, body.role)
    users = UserRepository(session)
    if await users.by_username(body.username) is not None:
        raise Conflict("a user with this username exists", username=body.username)
    password_hash = None
    if body.password is not None:
        password_hash = await asyncio.to_thread(hash_password, body.password.get_secret_value())
    if (
        body.oidc_issuer is not None
        and body.oidc_subject is not None
        and await users.by_oidc_identity(body.oidc_issuer, body.oidc_subject) is not None
    ):
        raise Conflict("a user with this OIDC identity exists", oidc_subject=body.oidc_subject)
    user = await users.add(
        User(
            username=body.username,
            password_hash=password_hash,
            role=body.role,
            oidc_issuer=body.oidc_issuer,
            oidc_subject=body.oidc_subject,
        ),
        org_ids,
    )
    details = {"role": user.role, "oidc_subject": user.oidc_subject}
    return await _audited(session, principal, user, org_ids, "user.created", details)


async def bind_oidc_identity(
    session: AsyncSession, principal: Principal, username: str, body: OidcIdentity
) -> UserRead:
    """Bind an existing user to an OIDC issuer and subject (replacing an earlier one).
    Binding an identity hands over the user, so the user must belong to at least one
    org and to none the caller is not a member of (404 otherwise, as for a stranger)."""
    users = UserRepository(session)
    user = await users.by_username(username)
    roles = await users.roles_of(user.id) if user is not None else {}
    org_ids = frozenset(roles)
    if user is None or not org_ids or not org_ids <= principal.org_ids:
        raise NotFound("no such user")
    await ensure_manageable(session, principal, user, roles)
    other = await users.by_oidc_identity(body.oidc_issuer, body.oidc_subject)
    if other is not None and other.id != user.id:
        raise Conflict("a user with this OIDC identity exists", oidc_subject=body.oidc_subject)
    user.oidc_issuer, user.oidc_subject = body.oidc_issuer, body.oidc_subject
    await session.flush()
    details = {"oidc_issuer": body.oidc_issuer, "oidc_subject": body.oidc_subject}
    return await _audited(session, principal, user, sorted(org_ids), "user.oidc_bound", details)


async def _audited(
    session: AsyncSession,
    principal: Principal,
    user: User,
    org_ids: list[uuid.UUID],
    action: str,
    details: dict[str, Any],
) -> UserRead:
    """Audit `action` on `user` in the chain of each of its orgs (in their order; the
    platform's for a user of none), and the user as the API shows it."""
    chains: list[uuid.UUID | None] = [*org_ids] or [None]
    for org_id in chains:
        await record(
            session,
            actor=principal.username,
            action=action,
            target=f"user:{user.username}",
            org_id=org_id,
            details=details,
        )
    return UserRead(
        id=user.id,
        username=user.username,
        role=user.role,
        org_ids=org_ids,
        created_at=user.created_at,
        oidc_issuer=user.oidc_issuer,
        oidc_subject=user.oidc_subject,
    )


async def ensure_admin(session: AsyncSession, password: str | None) -> bool:
    """Create user `admin` (role admin, a platform administrator) when it does not exist
    yet; True when created."""
    users = UserRepository(session)
    if await users.by_username(ADMIN_USERNAME) is not None:
        return False
    if not password:
        log.warning("no admin user and HUMANWORK_ADMIN_PASSWORD is unset: nobody can log in")
        return False
    hashed = await asyncio.to_thread(hash_password, password)
    await users.add(
        User(username=ADMIN_USERNAME, password_hash=hashed, role="admin", platform_admin=True)
    )
    await record(
        session,
        actor="system",
        action="user.created",
        target=f"user:{ADMIN_USERNAME}",
        details={"role": "admin", "bootstrap": True, "platformAdmin": True},
    )
    log.info("created the first admin user %r", ADMIN_USERNAME)
    return True
