"""Who a request acts as: `Principal` (a user with its role's capabilities and its orgs)
and `OrgScope` (a principal acting on one of its own orgs). Plain values, built by
`auth.dependencies` and read by every service, so they sit below both."""

from __future__ import annotations

import uuid
from dataclasses import dataclass


@dataclass(frozen=True)
class Principal:
    """An authenticated user as seen by one request."""

    user_id: uuid.UUID
    username: str
    role: str
    capabilities: frozenset[str]
    org_ids: frozenset[uuid.UUID]

    def can(self, capability: str) -> bool:
        return capability in self.capabilities


@dataclass(frozen=True)
class OrgScope:
    """A principal acting on one of its own orgs."""

    principal: Principal
    org_id: uuid.UUID
