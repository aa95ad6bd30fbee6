"""User use cases: create a user (role must exist, orgs must be the caller's), bootstrap
the first admin, describe the caller."""

from __future__ import annotations

import asyncio
import logging
import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.access.principal import Principal
from platform_api.access.repository import AccessMapRepository
from platform_api.accounts.repository import UserRepository
from platform_api.audit.service import record
from platform_api.auth.passwords import hash_password
from platform_api.errors import Conflict, NotFound, ValidationFailed
from platform_api.models import User
from platform_api.orgs.repository import OrgRepository
from platform_api.orgs.schemas import OrgRead
from platform_api.users.schemas import Me, OidcIdentity, UserCreate, UserRead

log = logging.getLogger(__name__)

ADMIN_USERNAME = "admin"


async def create_user(session: AsyncSession, principal: Principal, body: UserCreate) -> UserRead:
    """Create a user in some of the caller's orgs."""
    org_ids = sorted(set(body.org_ids))  # one lock order for the audit chain heads
    if any(o not in principal.org_ids for o in org_ids):
        raise NotFound("no such org")
    if not await AccessMapRepository(session).capabilities(body.role):
        raise ValidationFailed("unknown role", role=body.role)
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
    chains: list[uuid.UUID | None] = [*org_ids] or [None]
    for org_id in chains:
        await record(
            session,
            actor=principal.username,
            action="user.created",
            target=f"user:{user.username}",
            org_id=org_id,
            details={"role": user.role, "oidc_subject": user.oidc_subject},
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


async def bind_oidc_identity(
    session: AsyncSession, principal: Principal, username: str, body: OidcIdentity
) -> UserRead:
    """Bind an existing user to an OIDC issuer and subject (replacing an earlier one).
    Binding an identity hands over the user, so the user must belong to at least one
    org and to none the caller is not a member of (404 otherwise, as for a stranger)."""
    users = UserRepository(session)
    user = await users.by_username(username)
    org_ids = await users.org_ids(user.id) if user is not None else frozenset()
    if user is None or not org_ids or not org_ids <= principal.org_ids:
        raise NotFound("no such user")
    other = await users.by_oidc_identity(body.oidc_issuer, body.oidc_subject)
    if other is not None and other.id != user.id:
        raise Conflict("a user with this OIDC identity exists", oidc_subject=body.oidc_subject)
    user.oidc_issuer, user.oidc_subject = body.oidc_issuer, body.oidc_subject
    await session.flush()
    for org_id in sorted(org_ids):
        await record(
            session,
            actor=principal.username,
            action="user.oidc_bound",
            target=f"user:{user.username}",
            org_id=org_id,
            details={"oidc_issuer": body.oidc_issuer, "oidc_subject": body.oidc_subject},
        )
    return UserRead(
        id=user.id,
        username=user.username,
        role=user.role,
        org_ids=sorted(org_ids),
        created_at=user.created_at,
        oidc_issuer=user.oidc_issuer,
        oidc_subject=user.oidc_subject,
    )


async def describe(session: AsyncSession, principal: Principal) -> Me:
    """The caller with its capabilities and orgs."""
    orgs = await OrgRepository(session).list_in(principal.org_ids)
    user = await UserRepository(session).get(principal.user_id)
    assert user is not None
    return Me(
        id=user.id,
        username=user.username,
        role=user.role,
        capabilities=sorted(principal.capabilities),
        orgs=[OrgRead.model_validate(o) for o in orgs],
    )


async def ensure_admin(session: AsyncSession, password: str | None) -> bool:
    """Create user `admin` (role admin) when it does not exist yet; True when created."""
    users = UserRepository(session)
    if await users.by_username(ADMIN_USERNAME) is not None:
        return False
    if not password:
        log.warning("no admin user and HUMANWORK_ADMIN_PASSWORD is unset: nobody can log in")
        return False
    hashed = await asyncio.to_thread(hash_password, password)
    await users.add(User(username=ADMIN_USERNAME, password_hash=hashed, role="admin"))
    await record(
        session,
        actor="system",
        action="user.created",
        target=f"user:{ADMIN_USERNAME}",
        details={"role": "admin", "bootstrap": True},
    )
    log.info("created the first admin user %r", ADMIN_USERNAME)
    return True
