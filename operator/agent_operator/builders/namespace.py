"""Namespace checks: the org label an AgentInstance's namespace must carry and the
`restricted` Pod Security labels the operator adds."""

from __future__ import annotations

from collections.abc import Mapping

from humanwork_core.keys import RESTRICTED_NAMESPACE_LABELS
from humanwork_core.resources import (
    ORG_ID_LABEL,
    AgentInstanceSpec,
)

__all__ = ["RESTRICTED_NAMESPACE_LABELS", "missing_pod_security_labels", "org_mismatch"]


def org_mismatch(
    namespace_labels: Mapping[str, str], spec: AgentInstanceSpec
) -> tuple[str, str] | None:
    """Why the namespace may not hold this AgentInstance, as (reason, message), or None.

    The org label must be present and equal `spec.orgId`; the operator then provisions no
    child and sets `Ready=False` with this reason.
    """
    label = namespace_labels.get(ORG_ID_LABEL)
    if label is None:
        return (
            "NamespaceNotAnOrg",
            f"the namespace has no {ORG_ID_LABEL} label; label it with the org id "
            f"{spec.org_id} to provision this agent",
        )
    if label != spec.org_id:
        return (
            "OrgMismatch",
            f"spec.orgId {spec.org_id} differs from the namespace's {ORG_ID_LABEL} {label}",
        )
    return None


def missing_pod_security_labels(namespace_labels: Mapping[str, str]) -> dict[str, str]:
    """The `restricted` Pod Security labels the namespace lacks (labels it already has,
    even with other values, are the platform team's choice and are left alone)."""
    return {
        key: value
        for key, value in RESTRICTED_NAMESPACE_LABELS.items()
        if key not in namespace_labels
    }
