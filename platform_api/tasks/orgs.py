"""`OrgDirectory`: which org owns which namespace, cached in memory.

An org's id and namespace never change once created, so a known pair is kept for good;
an unknown namespace or id is looked up again at most every `MISS_SECONDS` (a new org is
found at once by its first lookup). Membership is not cached here: callers check the
principal's orgs on every request.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.models import Org
from platform_api.slots import Slot

MISS_SECONDS = 2.0


@dataclass(frozen=True, slots=True)
class OrgRef:
    """An org's id and namespace."""

    id: uuid.UUID
    namespace: str


class OrgDirectory:
    """namespace <-> org id, from the `orgs` table."""

    def __init__(self) -> None:
        self._by_namespace: dict[str, OrgRef] = {}
        self._by_id: dict[uuid.UUID, OrgRef] = {}
        self._misses: dict[object, float] = {}

    def _keep(self, org: Org) -> OrgRef:
        ref = OrgRef(org.id, org.namespace)
        self._by_namespace[ref.namespace] = ref
        self._by_id[ref.id] = ref
        return ref

    def _miss(self, key: object) -> None:
        if len(self._misses) > 10_000:
            self._misses.clear()
        self._misses[key] = time.monotonic()

    def _recent_miss(self, key: object) -> bool:
        at = self._misses.get(key)
        return at is not None and time.monotonic() - at < MISS_SECONDS

    async def by_namespace(self, session: AsyncSession, namespace: str) -> OrgRef | None:
        found = self._by_namespace.get(namespace)
        if found is not None or self._recent_miss(("ns", namespace)):
            return found
        org = (await session.execute(select(Org).where(Org.namespace == namespace))).scalar()
        if org is None:
            self._miss(("ns", namespace))
            return None
        return self._keep(org)

    async def by_id(self, session: AsyncSession, org_id: uuid.UUID) -> OrgRef | None:
        found = self._by_id.get(org_id)
        if found is not None or self._recent_miss(("id", org_id)):
            return found
        org = await session.get(Org, org_id)
        if org is None:
            self._miss(("id", org_id))
            return None
        return self._keep(org)


ORG_DIRECTORY: Slot[OrgDirectory | None] = Slot("org_directory")
Directory = Annotated[OrgDirectory | None, Depends(ORG_DIRECTORY)]
"""The watch's org directory (the decision index's), None without Kubernetes."""
