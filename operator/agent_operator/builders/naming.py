"""Names, labels, the owner reference and metadata every child of an AgentInstance
carries, and the annotation keys and file names the children share."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, ClassVar

from humanwork_core import keys
from humanwork_core.errors import HumanworkError
from humanwork_core.resources import (
    API_VERSION,
    ORG_ID_LABEL,
    AgentInstance,
    AgentInstanceSpec,
)
from humanwork_core.tokens import agent_subject

from ..config import OperatorSettings

Manifest = dict[str, Any]


APP_NAME = "humanwork-agent"


COMPONENT = "agent"


PART_OF = "humanwork"


MANAGED_BY = "humanwork-operator"


CONFIG_HASH_ANNOTATION = keys.CONFIG_HASH


ROTATE_TOKEN_ANNOTATION = keys.ROTATE_TOKEN


REVOKE_TOKEN_ANNOTATION = keys.REVOKE_TOKEN


CONFIG_APPLIED_ANNOTATION = keys.CONFIG_APPLIED
"""The config hash the agent last reported as applied (written by the platform API when the
agent's HMAC-signed `config.applied` event arrives); ConfigApplied is True when it equals
status.configHash."""


TOKEN_EXPIRES_ANNOTATION = keys.TOKEN_EXPIRES_AT


CONFIG_FILE = "config.json"


class BuildError(HumanworkError):
    """The AgentInstance lacks something every child needs (namespace, uid)."""

    code: ClassVar[str] = "agent_instance_incomplete"


def agent_name(instance: AgentInstance) -> str:
    """Name of the ServiceAccount, Role, RoleBinding, NetworkPolicy, Deployment and Service."""
    return f"{instance.metadata.name}-agent"


def owned_by(body: Mapping[str, Any] | None, instance: AgentInstance) -> bool:
    """Whether an existing child's controlling owner is this very AgentInstance (by uid):
    a Secret left by a deleted instance of the same name, or planted by someone, is not."""
    uid = instance.metadata.uid
    refs = ((body or {}).get("metadata") or {}).get("ownerReferences") or []
    return bool(uid) and any(
        ref.get("uid") == uid and ref.get("controller") and ref.get("kind") == instance.kind
        for ref in refs
    )


def token_secret_name(instance: AgentInstance) -> str:
    return f"{instance.metadata.name}-agent-token"


def callback_secret_name(instance: AgentInstance) -> str:
    return f"{instance.metadata.name}-agent-callback"


def config_map_name(instance: AgentInstance) -> str:
    return f"{instance.metadata.name}-agent-config"


def platform_ca_name(instance: AgentInstance) -> str:
    return f"{instance.metadata.name}-platform-ca"


def namespace_of(instance: AgentInstance) -> str:
    namespace = instance.metadata.namespace
    if not namespace:
        raise BuildError("the AgentInstance has no namespace", name=instance.metadata.name)
    return namespace


def agent_id(instance: AgentInstance) -> str:
    """The agent's identity in its token (`sub`) and environment: `<namespace>/<name>`."""
    return agent_subject(namespace_of(instance), instance.metadata.name)


def selector_labels(instance: AgentInstance) -> dict[str, str]:
    """The immutable subset of labels that selects the agent's pods."""
    return {
        "app.kubernetes.io/name": APP_NAME,
        "app.kubernetes.io/instance": instance.metadata.name,
    }


def label_selector(instance: AgentInstance) -> str:
    """:func:`selector_labels` as a selector string (for `status.selector` and scaling)."""
    return ",".join(f"{key}={value}" for key, value in selector_labels(instance).items())


def labels(instance: AgentInstance) -> dict[str, str]:
    """The labels of every child (and of the agent pods)."""
    return {
        **selector_labels(instance),
        "app.kubernetes.io/component": COMPONENT,
        "app.kubernetes.io/part-of": PART_OF,
        "app.kubernetes.io/managed-by": MANAGED_BY,
        ORG_ID_LABEL: instance.spec.org_id,
    }


def owner_reference(instance: AgentInstance) -> dict[str, Any]:
    """The controlling owner reference every child carries."""
    uid = instance.metadata.uid
    if not uid:
        raise BuildError("the AgentInstance has no uid yet", name=instance.metadata.name)
    return {
        "apiVersion": API_VERSION,
        "kind": instance.kind,
        "name": instance.metadata.name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _metadata(
    instance: AgentInstance, name: str, annotations: Mapping[str, str] | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace_of(instance),
        "labels": labels(instance),
        "ownerReferences": [owner_reference(instance)],
    }
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta


def agent_endpoint(instance: AgentInstance, settings: OperatorSettings) -> str:
    """In-cluster URL of the agent's control API (its Service)."""
    return f"http://{agent_name(instance)}.{namespace_of(instance)}.svc:{settings.agent_port}"


def desired_replicas(spec: AgentInstanceSpec) -> int:
    """Pods the Deployment should run: none while paused."""
    return 0 if spec.paused else spec.replicas


def _b64(text: str | bytes) -> str:
    raw = text.encode("utf-8") if isinstance(text, str) else text
    return base64.b64encode(raw).decode("ascii")


def _rfc3339(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
