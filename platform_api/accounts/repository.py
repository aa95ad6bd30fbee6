"""Database access of users and memberships."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.errors import Conflict
from platform_api.models import Membership, User


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
