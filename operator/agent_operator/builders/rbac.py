"""Identity and RBAC: the agent's ServiceAccount, Role and RoleBinding, and the
operator's own Secret RoleBinding in an org namespace."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from humanwork_core.resources import (
    GROUP,
    AgentInstance,
    names,
)

from ..config import OperatorSettings
from .naming import (
    MANAGED_BY,
    PART_OF,
    Manifest,
    _metadata,
    agent_name,
    namespace_of,
)


def service_account(instance: AgentInstance) -> Manifest:
    """The agent's identity; its API token is mounted explicitly by the Deployment."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": _metadata(instance, agent_name(instance)),
        "automountServiceAccountToken": False,
    }


AGENT_RBAC_RULES: tuple[Mapping[str, Any], ...] = (
    {
        "apiGroups": [GROUP],
        "resources": [names.TASKS],
        "verbs": ["get", "list", "watch", "create"],
    },
    {
        "apiGroups": [GROUP],
        "resources": ["agentictasks/status"],
        "verbs": ["get", "patch"],
    },
)
"""Everything an agent may do through the Kubernetes API, in its own namespace."""


def role(instance: AgentInstance) -> Manifest:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": _metadata(instance, agent_name(instance)),
        "rules": [{key: list(value) for key, value in rule.items()} for rule in AGENT_RBAC_RULES],
    }


def role_binding(instance: AgentInstance) -> Manifest:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": _metadata(instance, agent_name(instance)),
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": agent_name(instance),
        },
        "subjects": [
            {
                "kind": "ServiceAccount",
                "name": agent_name(instance),
                "namespace": namespace_of(instance),
            }
        ],
    }


ORG_SECRETS_CLUSTER_ROLE = "humanwork-operator-org-secrets"
"""The ClusterRole with the Secret verbs the operator needs in an org namespace
(manifests/base/operator/rbac.yaml); it holds `bind` on this one ClusterRole only."""


ORG_SECRETS_BINDING = "humanwork-operator-secrets"


def org_secrets_role_binding(namespace: str, settings: OperatorSettings) -> Manifest:
    """The RoleBinding that gives the operator (and no one else) the Secret verbs of one
    org namespace: its ClusterRole holds none. The admission policy
    humanwork-operator-org-binding refuses it outside a namespace labelled
    humanwork.io/org-id or for another subject. Not owned by an AgentInstance: it serves
    every instance of the namespace and goes with the namespace."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {
            "name": ORG_SECRETS_BINDING,
            "namespace": namespace,
            "labels": {
                "app.kubernetes.io/name": MANAGED_BY,
                "app.kubernetes.io/component": "operator",
                "app.kubernetes.io/part-of": PART_OF,
                "app.kubernetes.io/managed-by": MANAGED_BY,
            },
        },
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": ORG_SECRETS_CLUSTER_ROLE,
        },
        "subjects": [
            {
                "kind": "ServiceAccount",
                "name": settings.service_account,
                "namespace": settings.platform_namespace,
            }
        ],
    }
