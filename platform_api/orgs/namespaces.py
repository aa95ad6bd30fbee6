"""The seam between org creation and Kubernetes: `OrgNamespaces`.

Creating an org must also create its namespace `org-<slug>` labelled
`humanwork.io/org-id=<org uuid>`. The platform API does not talk to Kubernetes yet, so
`create_app` uses `NoopOrgNamespaces` unless given another implementation; the
Kubernetes-backed one will implement the same protocol (and must be idempotent, since a
failed database commit after `ensure` leaves the namespace in place for a retry).
"""

from __future__ import annotations

import uuid
from typing import Annotated, Protocol

from fastapi import Depends

from humanwork_core import keys
from platform_api.slots import Slot

NAMESPACE_PREFIX = "org-"
ORG_ID_LABEL = keys.ORG_ID_LABEL


def namespace_for(slug: str) -> str:
    """The Kubernetes namespace of the org with `slug`."""
    return f"{NAMESPACE_PREFIX}{slug}"


class OrgNamespaces(Protocol):
    """Creates the Kubernetes namespace of an org."""

    async def ensure(self, namespace: str, org_id: uuid.UUID) -> None:
        """Make `namespace` exist with the label `humanwork.io/org-id=<org_id>`."""
        ...


class NoopOrgNamespaces:
    """The default: remembers the namespaces it was asked for and creates nothing."""

    def __init__(self) -> None:
        self.requested: dict[str, uuid.UUID] = {}

    async def ensure(self, namespace: str, org_id: uuid.UUID) -> None:
        self.requested[namespace] = org_id


NAMESPACES: Slot[OrgNamespaces] = Slot("namespaces")
Namespaces = Annotated[OrgNamespaces, Depends(NAMESPACES)]
"""The org namespace seam."""
