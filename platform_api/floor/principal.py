"""On the shared floor: who a request acts as: `Principal` (a user with a role per org
it belongs to, each role's capabilities, and whether it is a platform administrator)
and `OrgScope` (a principal acting on one of its own orgs). Plain values, built by
`auth.dependencies` and read by every service, so they sit below both.

A principal's *view* is the set of orgs a request may touch: every membership at first,
narrowed by `holding(capability)` to the orgs whose role holds that capability (what
`require` answers) and by `in_org` to one org (what `require_in_org` answers). `org_ids`
and `capabilities` are those of the view, so a service that scopes its queries to
`principal.org_ids` never reaches an org where the caller's role there lacks the
capability the endpoint names.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple


class Grant(NamedTuple):
    """A user's role in one org and that role's capabilities (the access map's); with
    the org's namespace and whether it is deactivated, read in the same query (what the
    deactivation guard needs of a member, so it makes no query of its own)."""

    role: str
    capabilities: frozenset[str]
    deactivated: bool = False
    namespace: str = ""


@dataclass(frozen=True)
class Principal:
    """An authenticated user as seen by one request."""

    user_id: uuid.UUID
    username: str
    grants: Mapping[uuid.UUID, Grant]
    platform_admin: bool = False
    view: frozenset[uuid.UUID] | None = None
    """The orgs this request may touch; None for every membership."""

    @property
    def org_ids(self) -> frozenset[uuid.UUID]:
        """The orgs in view."""
        every = frozenset(self.grants)
        return every if self.view is None else every & self.view

    @property
    def capabilities(self) -> frozenset[str]:
        """What the caller's roles hold in the orgs in view (together)."""
        return frozenset().union(*(self.grants[o].capabilities for o in self.org_ids))

    @property
    def role(self) -> str:
        """The role in the orgs in view (several joined by `,`), for the audit log."""
        return ",".join(sorted({self.grants[o].role for o in self.org_ids}))

    def can(self, capability: str) -> bool:
        """Whether the caller holds `capability` in some org in view."""
        return capability in self.capabilities

    def can_in(self, org_id: uuid.UUID, capability: str) -> bool:
        """Whether the caller's role in `org_id` holds `capability`."""
        grant = self.grants.get(org_id)
        return grant is not None and org_id in self.org_ids and capability in grant.capabilities

    def role_in(self, org_id: uuid.UUID) -> str | None:
        """The caller's role in `org_id`, or None for an org it is not a member of."""
        grant = self.grants.get(org_id)
        return None if grant is None else grant.role

    def capabilities_in(self, org_id: uuid.UUID) -> frozenset[str]:
        """What the caller's role in `org_id` holds (nothing outside its orgs)."""
        grant = self.grants.get(org_id)
        return frozenset() if grant is None else grant.capabilities

    def holding(self, capability: str) -> Principal:
        """The principal narrowed to the orgs in view whose role holds `capability`."""
        orgs = frozenset(o for o in self.org_ids if capability in self.grants[o].capabilities)
        return dataclasses.replace(self, view=orgs)

    def in_org(self, org_id: uuid.UUID) -> Principal:
        """The principal narrowed to `org_id` (nothing when it is not a member)."""
        return dataclasses.replace(self, view=self.org_ids & {org_id})


@dataclass(frozen=True)
class OrgScope:
    """A principal acting on one of its own orgs (`principal` is narrowed to it)."""

    principal: Principal
    org_id: uuid.UUID
