"""Pure builders: an AgentInstance (and the operator's settings) in, Kubernetes manifests out.

Each function returns a plain dict in the shape the API server stores (``data`` of Secrets
base64-encoded), built from the typed models, never from templated YAML. Nothing here
talks to the API server or imports kopf; the reconcile layer applies what these return.

Every child of an AgentInstance lives in its namespace, is named ``<name>-agent[-...]``,
carries the recommended ``app.kubernetes.io/*`` labels and the org label, and has the
AgentInstance as its controlling owner, so deleting the AgentInstance garbage-collects it.

The sandbox these describe: a ServiceAccount whose Role reaches only AgenticTasks in its own
namespace; a NetworkPolicy that admits ingress only from the platform namespace and egress
only to DNS, the platform API and the configured CIDRs; a pod that meets the ``restricted``
Pod Security Standard, holds its platform token and callback secret as read-only files, its
LLM key as the one secret env var, and nothing else: no database, cache or third-party
credentials. Configuration (persona, model, tools, thresholds) is a ConfigMap mounted as a
file, so a change reaches the running agent without restarting its pods.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar

from humanwork_core import keys
from humanwork_core.errors import HumanworkError
from humanwork_core.resources import (
    API_VERSION,
    GROUP,
    ORG_ID_LABEL,
    AgentInstance,
    AgentInstanceSpec,
)
from humanwork_core.runtime_config import AgentRuntimeConfig
from humanwork_core.tokens import MintedToken, SigningKey, agent_subject, jwks

from .config import OperatorSettings

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
CONTAINER_NAME = "agent"
PORT_NAME = "http"
HEALTH_PATH = "/v1/health"
SECRETS_DIR = "/var/run/humanwork"
TOKEN_DIR = f"{SECRETS_DIR}/token"
CALLBACK_DIR = f"{SECRETS_DIR}/callback"
CALLBACK_KEY = "key"
"""The key of the callback master key in its Secret."""
CONFIG_DIR = f"{SECRETS_DIR}/config"
KUBE_API_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
STATE_DIR = "/tmp/humanwork-agent"
"""The agent's checkpoints (on the pod's `tmp` emptyDir: they survive a container restart)."""
CONFIG_FILE = "config.json"
READ_ONLY_FILE_MODE = 0o440
RESTRICTED_NAMESPACE_LABELS: Mapping[str, str] = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
    "pod-security.kubernetes.io/warn": "restricted",
    "pod-security.kubernetes.io/audit": "restricted",
}
SIGNING_KEYS_INDEX = "keys.json"
JWKS_FILE = "jwks.json"


class BuildError(HumanworkError):
    """The AgentInstance lacks something every child needs (namespace, uid)."""

    code: ClassVar[str] = "agent_instance_incomplete"


# --- Names, labels, owner ----------------------------------------------------------------


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


# --- Configuration -----------------------------------------------------------------------


def agent_config(spec: AgentInstanceSpec) -> dict[str, Any]:
    """The configuration the agent hot-reloads (`humanwork_core.runtime_config`, the model
    the agent parses it with): persona, model, thresholds and tools only."""
    return AgentRuntimeConfig.of_instance(spec).wire()


def canonical_config(spec: AgentInstanceSpec) -> str:
    """:func:`agent_config` as canonical JSON (sorted keys, no spaces, UTF-8 as is)."""
    return AgentRuntimeConfig.of_instance(spec).canonical_json()


def config_hash(spec: AgentInstanceSpec) -> str:
    """SHA-256 (hex) of the canonical configuration: scaling, pausing, resources or token
    policy changes leave it unchanged; the agent recomputes it from `config.json`."""
    return hashlib.sha256(canonical_config(spec).encode("utf-8")).hexdigest()


# --- Children ----------------------------------------------------------------------------


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
        "resources": ["agentictasks"],
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


def _b64(text: str | bytes) -> str:
    raw = text.encode("utf-8") if isinstance(text, str) else text
    return base64.b64encode(raw).decode("ascii")


def _rfc3339(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def token_secret(instance: AgentInstance, token: MintedToken) -> Manifest:
    """The agent's platform token (`token`) and its `kid`, `jti` and `expiresAt`."""
    claims = token.claims
    expires = _rfc3339(claims.expires_at)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": _metadata(
            instance, token_secret_name(instance), {TOKEN_EXPIRES_ANNOTATION: expires}
        ),
        "data": {
            "token": _b64(token.token),
            "kid": _b64(claims.kid),
            "jti": _b64(claims.jti),
            "expiresAt": _b64(expires),
        },
    }


def callback_secret(instance: AgentInstance, secret: str) -> Manifest:
    """The per-instance HMAC secret of the callbacks, under `secret`."""
    if not secret:
        raise BuildError("the callback secret must not be empty", name=instance.metadata.name)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": _metadata(instance, callback_secret_name(instance)),
        "data": {"secret": _b64(secret)},
    }


def config_map(instance: AgentInstance) -> Manifest:
    """`config.json` (canonical JSON of :func:`agent_config`) and its `configHash`."""
    digest = config_hash(instance.spec)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(
            instance, config_map_name(instance), {CONFIG_HASH_ANNOTATION: digest}
        ),
        "data": {CONFIG_FILE: canonical_config(instance.spec), "configHash": digest},
    }


def _egress_rules(instance: AgentInstance, settings: OperatorSettings) -> list[dict[str, Any]]:
    dns_ports = [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]
    dns: dict[str, Any] = {"ports": dns_ports}
    if settings.dns_namespace is not None:
        dns["to"] = [
            {
                "namespaceSelector": {
                    "matchLabels": {"kubernetes.io/metadata.name": settings.dns_namespace}
                }
            }
        ]
    rules: list[dict[str, Any]] = [
        dns,
        {
            "to": [_platform_pods(settings)],
            "ports": [{"protocol": "TCP", "port": settings.platform_api_port}],
        },
    ]
    egress = instance.spec.egress
    for cidr in egress.llm_cidrs:
        rules.append({"to": [{"ipBlock": {"cidr": cidr}}], "ports": [_tcp(443)]})
    for extra in egress.extra:
        rules.append(
            {"to": [{"ipBlock": {"cidr": extra.cidr}}], "ports": [_tcp(p) for p in extra.ports]}
        )
    return rules


def _tcp(port: int) -> dict[str, Any]:
    return {"protocol": "TCP", "port": port}


PLATFORM_POD_LABELS = {"app.kubernetes.io/name": "humanwork-platform-api"}
"""The labels of the platform API's pods (manifests/base/platform): the only pods that may
reach an agent, and the only ones of the platform namespace an agent may reach."""

ApiServerEndpoint = tuple[str, int]


def api_server_endpoints(slices: Iterable[Mapping[str, Any]]) -> list[ApiServerEndpoint]:
    """(address, port) of the API server, from the EndpointSlices of the `kubernetes`
    Service in `default` (what the agent's connection to kubernetes.default reaches once
    the Service address is translated, which is what a NetworkPolicy sees)."""
    found: set[ApiServerEndpoint] = set()
    for eps in slices:
        ports = [
            int(p["port"])
            for p in eps.get("ports") or []
            if p.get("port") and p.get("protocol", "TCP") == "TCP"
        ]
        for endpoint in eps.get("endpoints") or []:
            if (endpoint.get("conditions") or {}).get("ready") is False:
                continue
            found.update((addr, port) for addr in endpoint.get("addresses") or [] for port in ports)
    return sorted(found)


def _api_server_rule(endpoints: Sequence[ApiServerEndpoint]) -> list[dict[str, Any]]:
    if not endpoints:
        return []
    addresses = sorted({addr for addr, _ in endpoints})
    ports = sorted({port for _, port in endpoints})
    return [
        {
            "to": [{"ipBlock": {"cidr": f"{a}/128" if ":" in a else f"{a}/32"}} for a in addresses],
            "ports": [_tcp(p) for p in ports],
        }
    ]


def network_policy(
    instance: AgentInstance,
    settings: OperatorSettings,
    api_server: Sequence[ApiServerEndpoint] = (),
) -> Manifest:
    """Default deny for the agent pods, except: ingress from the platform API's pods on the
    agent port; egress to DNS, the platform API's pods, the API server's endpoints
    (`api_server`, to watch the agent's AgenticTasks) and the CIDRs of `spec.egress`."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _metadata(instance, agent_name(instance)),
        "spec": {
            "podSelector": {"matchLabels": selector_labels(instance)},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [_platform_pods(settings)], "ports": [_tcp(settings.agent_port)]}],
            "egress": _egress_rules(instance, settings) + _api_server_rule(api_server),
        },
    }


def _platform_pods(settings: OperatorSettings) -> dict[str, Any]:
    return {
        "namespaceSelector": {
            "matchLabels": {"kubernetes.io/metadata.name": settings.platform_namespace}
        },
        "podSelector": {"matchLabels": dict(PLATFORM_POD_LABELS)},
    }


def _quantity(value: int | str | None, default: str) -> str:
    return default if value is None else str(value)


def container_resources(spec: AgentInstanceSpec, settings: OperatorSettings) -> dict[str, Any]:
    """Requests and limits: `spec.resources`, with the settings' defaults for what is unset."""
    requests, limits = spec.resources.requests, spec.resources.limits
    return {
        "requests": {
            "cpu": _quantity(requests.cpu, settings.default_cpu_request),
            "memory": _quantity(requests.memory, settings.default_memory_request),
        },
        "limits": {
            "cpu": _quantity(limits.cpu, settings.default_cpu_limit),
            "memory": _quantity(limits.memory, settings.default_memory_limit),
        },
    }


def _env(instance: AgentInstance, settings: OperatorSettings) -> list[dict[str, Any]]:
    spec = instance.spec
    platform = settings.platform_api_url
    return [
        {"name": "HUMANWORK_PLATFORM_URL", "value": platform},
        {"name": "HUMANWORK_CALLBACK_URL", "value": f"{platform}/v1/agent-events"},
        {"name": "HUMANWORK_AGENT_ID", "value": agent_id(instance)},
        {"name": "HUMANWORK_AGENT_NAME", "value": instance.metadata.name},
        {"name": "HUMANWORK_ORG_ID", "value": spec.org_id},
        {"name": "HUMANWORK_NAMESPACE", "value": namespace_of(instance)},
        {"name": "HUMANWORK_AGENT_PORT", "value": str(settings.agent_port)},
        {"name": "HUMANWORK_TOKEN_FILE", "value": f"{TOKEN_DIR}/token"},
        {"name": "HUMANWORK_CALLBACK_SECRET_FILE", "value": f"{CALLBACK_DIR}/secret"},
        {"name": "HUMANWORK_CONFIG_FILE", "value": f"{CONFIG_DIR}/{CONFIG_FILE}"},
        {"name": "HUMANWORK_KUBE_API_DIR", "value": KUBE_API_DIR},
        {"name": "HUMANWORK_STATE_DIR", "value": STATE_DIR},
        {"name": "HUMANWORK_LLM_BASE_URL", "value": spec.llm.base_url},
        {
            "name": "HUMANWORK_LLM_API_KEY",
            "valueFrom": {
                "secretKeyRef": {
                    "name": spec.llm.api_key_secret_ref.name,
                    "key": spec.llm.api_key_secret_ref.key,
                    "optional": False,
                }
            },
        },
        {"name": "HOME", "value": "/tmp"},
    ]


def _volumes(instance: AgentInstance, settings: OperatorSettings) -> list[dict[str, Any]]:
    return [
        {
            "name": "platform-token",
            "secret": {
                "secretName": token_secret_name(instance),
                "defaultMode": READ_ONLY_FILE_MODE,
            },
        },
        {
            "name": "callback-secret",
            "secret": {
                "secretName": callback_secret_name(instance),
                "defaultMode": READ_ONLY_FILE_MODE,
            },
        },
        {
            "name": "agent-config",
            "configMap": {"name": config_map_name(instance), "defaultMode": READ_ONLY_FILE_MODE},
        },
        {
            "name": "kube-api-access",
            "projected": {
                "defaultMode": READ_ONLY_FILE_MODE,
                "sources": [
                    {
                        "serviceAccountToken": {
                            "path": "token",
                            "expirationSeconds": settings.kube_api_token_seconds,
                        }
                    },
                    {
                        "configMap": {
                            "name": "kube-root-ca.crt",
                            "items": [{"key": "ca.crt", "path": "ca.crt"}],
                        }
                    },
                    {
                        "downwardAPI": {
                            "items": [
                                {
                                    "path": "namespace",
                                    "fieldRef": {
                                        "apiVersion": "v1",
                                        "fieldPath": "metadata.namespace",
                                    },
                                }
                            ]
                        }
                    },
                ],
            },
        },
        {"name": "tmp", "emptyDir": {"sizeLimit": settings.tmp_size_limit}},
    ]


def _volume_mounts() -> list[dict[str, Any]]:
    return [
        {"name": "platform-token", "mountPath": TOKEN_DIR, "readOnly": True},
        {"name": "callback-secret", "mountPath": CALLBACK_DIR, "readOnly": True},
        {"name": "agent-config", "mountPath": CONFIG_DIR, "readOnly": True},
        {"name": "kube-api-access", "mountPath": KUBE_API_DIR, "readOnly": True},
        {"name": "tmp", "mountPath": "/tmp"},
    ]


def _probe(period_seconds: int, initial_delay_seconds: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": HEALTH_PATH, "port": PORT_NAME, "scheme": "HTTP"},
        "initialDelaySeconds": initial_delay_seconds,
        "periodSeconds": period_seconds,
        "timeoutSeconds": 2,
        "failureThreshold": 3,
    }


def pod_template(instance: AgentInstance, settings: OperatorSettings) -> dict[str, Any]:
    """The hardened agent pod (meets the `restricted` Pod Security Standard)."""
    uid = settings.agent_run_as_user
    seccomp = {"type": "RuntimeDefault"}
    container = {
        "name": CONTAINER_NAME,
        "image": instance.spec.image or settings.agent_image,
        "imagePullPolicy": settings.agent_image_pull_policy,
        "ports": [{"name": PORT_NAME, "containerPort": settings.agent_port, "protocol": "TCP"}],
        "env": _env(instance, settings),
        "resources": container_resources(instance.spec, settings),
        "volumeMounts": _volume_mounts(),
        "livenessProbe": _probe(period_seconds=10, initial_delay_seconds=5),
        "readinessProbe": _probe(period_seconds=5, initial_delay_seconds=2),
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": uid,
            "runAsGroup": uid,
            "privileged": False,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": dict(seccomp),
        },
    }
    return {
        "metadata": {"labels": labels(instance)},
        "spec": {
            "serviceAccountName": agent_name(instance),
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": uid,
                "runAsGroup": uid,
                "fsGroup": uid,
                "seccompProfile": dict(seccomp),
            },
            "containers": [container],
            "volumes": _volumes(instance, settings),
            "terminationGracePeriodSeconds": 30,
            **scheduling(instance.spec),
        },
    }


def scheduling(spec: AgentInstanceSpec) -> dict[str, Any]:
    """nodeSelector, tolerations and runtimeClassName of the agent pods, where set."""
    fields: dict[str, Any] = {}
    if spec.node_selector:
        fields["nodeSelector"] = dict(spec.node_selector)
    if spec.tolerations:
        fields["tolerations"] = [
            t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in spec.tolerations
        ]
    if spec.runtime_class_name:
        fields["runtimeClassName"] = spec.runtime_class_name
    return fields


def deployment(instance: AgentInstance, settings: OperatorSettings) -> Manifest:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(instance, agent_name(instance)),
        "spec": {
            "replicas": desired_replicas(instance.spec),
            "selector": {"matchLabels": selector_labels(instance)},
            "template": pod_template(instance, settings),
        },
    }


def service(instance: AgentInstance, settings: OperatorSettings) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(instance, agent_name(instance)),
        "spec": {
            "type": "ClusterIP",
            "selector": selector_labels(instance),
            "ports": [
                {
                    "name": PORT_NAME,
                    "port": settings.agent_port,
                    "targetPort": PORT_NAME,
                    "protocol": "TCP",
                }
            ],
        },
    }


def children(
    instance: AgentInstance,
    settings: OperatorSettings,
    token: MintedToken,
    callback_secret_value: str,
    api_server: Sequence[ApiServerEndpoint] = (),
) -> list[Manifest]:
    """Every child of the AgentInstance, in the order to apply them: identity and RBAC,
    secrets and configuration, the NetworkPolicy before any pod can start, the Service,
    and last the Deployment."""
    return [
        service_account(instance),
        role(instance),
        role_binding(instance),
        token_secret(instance, token),
        callback_secret(instance, callback_secret_value),
        config_map(instance),
        network_policy(instance, settings, api_server),
        service(instance, settings),
        deployment(instance, settings),
    ]


# --- Namespace checks --------------------------------------------------------------------


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


# --- The operator's own key material -----------------------------------------------------


def _platform_metadata(settings: OperatorSettings, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": settings.platform_namespace,
        "labels": {
            "app.kubernetes.io/name": MANAGED_BY,
            "app.kubernetes.io/component": "token-signing",
            "app.kubernetes.io/part-of": PART_OF,
            "app.kubernetes.io/managed-by": MANAGED_BY,
        },
    }


ORG_SECRETS_CLUSTER_ROLE = "humanwork-operator-org-secrets"
"""The ClusterRole with the Secret verbs the operator needs in an org namespace
(manifests/base/operator/rbac.yaml); it holds `bind` on this one ClusterRole only."""
ORG_SECRETS_BINDING = "humanwork-operator-secrets"


def org_secrets_role_binding(namespace: str, settings: OperatorSettings) -> Manifest:
    """The RoleBinding that gives the operator (and no one else) the Secret verbs of one
    org namespace: its ClusterRole holds none (issue 12, item 6). The admission policy
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


def signing_keys_secret(
    keys: Sequence[tuple[SigningKey, datetime]], settings: OperatorSettings
) -> Manifest:
    """The operator's signing keys: `<kid>.pem` per key and `keys.json`, the index of kids
    with their creation times (what :func:`humanwork_core.tokens.key_retention` needs)."""
    index = [{"kid": key.kid, "createdAt": _rfc3339(created)} for key, created in keys]
    data = {f"{key.kid}.pem": _b64(key.to_pem()) for key, _ in keys}
    data[SIGNING_KEYS_INDEX] = _b64(json.dumps(index, separators=(",", ":")))
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": _platform_metadata(settings, settings.signing_keys_secret),
        "data": data,
    }


def callback_key_secret(master: str, settings: OperatorSettings) -> Manifest:
    """The master key of the callback secrets (under `key`), see
    :func:`humanwork_core.signing.derive_secret`."""
    if not master:
        raise BuildError("the callback master key must not be empty")
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": _platform_metadata(settings, settings.callback_key_secret),
        "data": {CALLBACK_KEY: _b64(master)},
    }


def read_signing_keys_secret(data: Mapping[str, str]) -> list[tuple[SigningKey, datetime]]:
    """The keys of a Secret written by :func:`signing_keys_secret` (its base64 `data`).

    ValueError when the index is missing or names a key the Secret does not hold, or when
    a PEM does not match its kid.
    """
    raw_index = data.get(SIGNING_KEYS_INDEX)
    if raw_index is None:
        raise ValueError(f"the signing keys Secret has no {SIGNING_KEYS_INDEX}")
    entries = json.loads(base64.b64decode(raw_index))
    if not isinstance(entries, list):
        raise ValueError(f"{SIGNING_KEYS_INDEX} must be a list")
    keys: list[tuple[SigningKey, datetime]] = []
    for entry in entries:
        if not isinstance(entry, dict) or not {"kid", "createdAt"} <= entry.keys():
            raise ValueError(f"{SIGNING_KEYS_INDEX} entries need kid and createdAt")
        kid, created = str(entry["kid"]), str(entry["createdAt"])
        pem = data.get(f"{kid}.pem")
        if pem is None:
            raise ValueError(f"the signing keys Secret lacks {kid}.pem")
        key = SigningKey.from_pem(base64.b64decode(pem))
        if key.kid != kid:
            raise ValueError(f"{kid}.pem holds the key {key.kid}")
        keys.append((key, datetime.fromisoformat(created.replace("Z", "+00:00"))))
    return keys


def jwks_config_map(published: Iterable[SigningKey], settings: OperatorSettings) -> Manifest:
    """The public keys the platform API verifies agent tokens with, as `jwks.json`."""
    document = jwks(published)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _platform_metadata(settings, settings.jwks_config_map),
        "data": {JWKS_FILE: json.dumps(document, sort_keys=True, separators=(",", ":"))},
    }


def revocations_config_map(settings: OperatorSettings) -> Manifest:
    """The (initially empty) list of revoked agent token ids the platform API reads."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _platform_metadata(settings, settings.revocations_config_map),
        "data": {},
    }


def event(
    body: Mapping[str, Any], reason: str, message: str, *, warning: bool, now: datetime
) -> Manifest:
    """A core/v1 Event about an AgentInstance (from the object as the API returned it)."""
    meta = body["metadata"]
    stamp = _rfc3339(now)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "generateName": f"{meta['name']}.",
            "namespace": meta["namespace"],
            "labels": {"app.kubernetes.io/managed-by": MANAGED_BY},
        },
        "involvedObject": {
            "apiVersion": body.get("apiVersion", API_VERSION),
            "kind": body.get("kind", "AgentInstance"),
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        },
        "reason": reason,
        "message": message[:1024],
        "type": "Warning" if warning else "Normal",
        "source": {"component": MANAGED_BY},
        "reportingComponent": MANAGED_BY,
        "reportingInstance": MANAGED_BY,
        "action": reason,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }
