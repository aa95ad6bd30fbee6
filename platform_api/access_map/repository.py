"""Database access of the access map (role -> capabilities): this slice's own storage,
also read by the users and orgs slices (which roles an org's admin may give) and by the
app at start (the default map seeded)."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.models import AccessGrant


class AccessMapRepository:
    """Reads and replaces roles' capabilities."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def capabilities(self, role: str) -> frozenset[str]:
        rows = await self.session.execute(
            select(AccessGrant.capability).where(AccessGrant.role == role)
        )
        return frozenset(rows.scalars())

    async def roles(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        rows = await self.session.execute(
            select(AccessGrant).order_by(AccessGrant.role, AccessGrant.capability)
        )
        for grant in rows.scalars():
            out.setdefault(grant.role, []).append(grant.capability)
        return out

    async def replace(self, role: str, capabilities: Iterable[str]) -> None:
        await self.session.execute(delete(AccessGrant).where(AccessGrant.role == role))
        self.session.add_all(
            AccessGrant(role=role, capability=c) for c in sorted(set(capabilities))
        )
        await self.session.flush()
