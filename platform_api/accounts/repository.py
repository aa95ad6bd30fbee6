"""Database access of users and memberships, and the caller's identity in one query
(`principal_of`: the user, its role's capabilities and its memberships, read fresh)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from sqlalchemy import ColumnElement, String, cast, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.errors import Conflict
from platform_api.models import AccessGrant, Membership, User

SEPARATOR = "\n"
"""Between aggregated capabilities and org ids (neither can hold a line break)."""


def _split(joined: str | None) -> list[str]:
    return joined.split(SEPARATOR) if joined else []


class UserRepository:
    """Reads and writes users and their memberships."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def by_username(self, username: str) -> User | None:
        result = await self.session.execute(select(User).where(User.username == username))
        return result.scalar_one_or_none()

    async def get(self, user_id: uuid.UUID) -> User | None:
        return await self.session.get(User, user_id)

    async def by_oidc_identity(self, issuer: str, subject: str) -> User | None:
        """The user bound to this OIDC issuer and subject (`sub`)."""
        result = await self.session.execute(
            select(User).where(User.oidc_issuer == issuer, User.oidc_subject == subject)
        )
        return result.scalar_one_or_none()

    async def principal_of(
        self, where: ColumnElement[bool]
    ) -> tuple[User, frozenset[str], frozenset[uuid.UUID]] | None:
        """The user `where` selects, its role's capabilities and its orgs, in one query
        (two correlated aggregates), or None when there is no such user."""
        capabilities = (
            select(func.aggregate_strings(AccessGrant.capability, SEPARATOR))
            .where(AccessGrant.role == User.role)
            .scalar_subquery()
        )
        org_ids = (
            select(func.aggregate_strings(cast(Membership.org_id, String), SEPARATOR))
            .where(Membership.user_id == User.id)
            .scalar_subquery()
        )
        query = select(User, capabilities, org_ids).where(where)
        found = (await self.session.execute(query)).first()
        if found is None:
            return None
        user, caps, orgs = found
        return user, frozenset(_split(caps)), frozenset(uuid.UUID(o) for o in _split(orgs))

    async def org_ids(self, user_id: uuid.UUID) -> frozenset[uuid.UUID]:
        result = await self.session.execute(
            select(Membership.org_id).where(Membership.user_id == user_id)
        )
        return frozenset(result.scalars())

    async def add(self, user: User, org_ids: Iterable[uuid.UUID] = ()) -> User:
        self.session.add(user)
        try:
            await self.session.flush()
        except IntegrityError:
            raise Conflict(
                "a user with this username or OIDC identity exists", username=user.username
            ) from None
        await self.add_memberships(user.id, org_ids)
        return user

    async def add_memberships(self, user_id: uuid.UUID, org_ids: Iterable[uuid.UUID]) -> None:
        self.session.add_all(Membership(user_id=user_id, org_id=o) for o in org_ids)
        await self.session.flush()
