"""`KubeOrgNamespaces`: the `OrgNamespaces` seam backed by the Kubernetes API.

`ensure` creates `org-<slug>` labelled `humanwork.io/org-id=<uuid>` and with every
`restricted` Pod Security label the operator asks of an org namespace
(`humanwork_core.keys.RESTRICTED_NAMESPACE_LABELS`: enforce, its version, warn, audit), so
the operator has none to add. It is idempotent: a namespace that
already exists with the same org label is accepted (a retry after a failed database
commit); one labelled for another org, or not at all, is a conflict.
"""

from __future__ import annotations

import uuid

from humanwork_core import keys
from platform_api.errors import Conflict
from platform_api.kube.client import KubeClient, KubeConflict

ORG_ID_LABEL = keys.ORG_ID_LABEL
"""The same label as `orgs.namespaces` (imported from the core, so that `orgs` may use
the Kubernetes client without a cycle)."""


class KubeOrgNamespaces:
    """Creates org namespaces through `KubeClient`."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube

    async def ensure(self, namespace: str, org_id: uuid.UUID) -> None:
        labels = {
            ORG_ID_LABEL: str(org_id),
            **keys.RESTRICTED_NAMESPACE_LABELS,
            "app.kubernetes.io/managed-by": "humanwork-platform-api",
        }
        try:
            await self.kube.create_namespace(namespace, labels)
        except KubeConflict:
            existing = await self.kube.namespace_labels(namespace)
            if existing.get(ORG_ID_LABEL) != str(org_id):
                raise Conflict(
                    "the namespace exists and belongs to another org", namespace=namespace
                ) from None
