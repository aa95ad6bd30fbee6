"""Database access of orgs."""

from __future__ import annotations

import uuid
from collections.abc import Collection

from sqlalchemy import bindparam, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from humanwork_core.policy import STRICT, OrgPolicy
from platform_api.db import autocommit_driver
from platform_api.errors import Conflict
from platform_api.models import Org

_ORGS = Org.__table__.c
_POLICY_IF_ACTIVE = select(_ORGS.approval_policy, _ORGS.deactivated_at).where(
    _ORGS.id == bindparam("org_id")
)
"""A decision's read of its org, in Core and built once (on every decision's hot path)."""
_POLICY_IF_ACTIVE_DRIVER = "SELECT approval_policy, deactivated_at FROM orgs WHERE id = $1::uuid"
"""The same read as the driver (asyncpg) takes it (`db.autocommit_driver`)."""


def stored_policy(stored: object) -> OrgPolicy:
    """An org's `approval_policy` column as its policy: the strict default when it set
    none (also what the caller's statement read beside it: `floor.accounts.OrgOfPath`)."""
    return OrgPolicy.model_validate(stored) if stored else STRICT


class OrgRepository:
    """Reads and writes orgs; reads are always restricted to given org ids."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def slug_taken(self, slug: str) -> bool:
        found = await self.session.execute(select(Org.id).where(Org.slug == slug))
        return found.first() is not None

    async def add(self, org: Org) -> Org:
        """Insert `org`; `Conflict` when its slug or namespace is taken (even by a racer)."""
        self.session.add(org)
        try:
            await self.session.flush()
        except IntegrityError:
            raise Conflict("an org with this slug exists", slug=org.slug) from None
        return org

    async def list_in(self, org_ids: Collection[uuid.UUID]) -> list[Org]:
        result = await self.session.execute(
            select(Org).where(Org.id.in_(list(org_ids))).order_by(Org.slug)
        )
        return list(result.scalars())

    async def get_in(self, org_id: uuid.UUID, org_ids: Collection[uuid.UUID]) -> Org | None:
        if org_id not in org_ids:
            return None
        return await self.session.get(Org, org_id)

    async def policy(self, org_id: uuid.UUID) -> OrgPolicy:
        """The org's approval policy, read now (never cached: a change applies at once);
        the strict default for an org that set none, or that does not exist."""
        stored = await self.session.scalar(select(Org.approval_policy).where(Org.id == org_id))
        return stored_policy(stored)

    async def policy_if_active(self, org_id: uuid.UUID) -> OrgPolicy | None:
        """`policy`, or None when the org is deactivated: both in one read (a decision
        needs both: whether the org is active, as `deactivation.repository.ensure_active`
        reads it, and the quorum)."""
        driver = autocommit_driver(self.session)
        if driver is not None:  # the decision routes' session: no SQLAlchemy around it
            found = await driver.fetchrow(_POLICY_IF_ACTIVE_DRIVER, org_id)
        else:
            found = (await self.session.execute(_POLICY_IF_ACTIVE, {"org_id": org_id})).first()
        if found is None:
            return STRICT
        stored, deactivated_at = found
        if deactivated_at is not None:
            return None
        return stored_policy(stored)
