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

The builders live in one module per resource: :mod:`.naming` (names, labels, owner,
metadata), :mod:`.rbac`, :mod:`.configuration` (ConfigMap and Secrets), :mod:`.network`
(NetworkPolicy), :mod:`.workload` (pod, Deployment, Service), :mod:`.keyring` (the
operator's own key material), :mod:`.namespace` (namespace checks) and :mod:`.events`;
this package re-exports them all, so `builders.<name>` names each.
"""

from __future__ import annotations

from collections.abc import Sequence

from humanwork_core.resources import AgentInstance
from humanwork_core.tokens import MintedToken

from ..config import OperatorSettings
from .configuration import (
    agent_config,
    callback_secret,
    canonical_config,
    config_hash,
    config_map,
    platform_ca_config_map,
    token_secret,
)
from .events import event
from .keyring import (
    CALLBACK_KEY,
    JWKS_FILE,
    SIGNING_KEYS_INDEX,
    callback_key_secret,
    jwks_config_map,
    read_signing_keys_secret,
    revocations_config_map,
    signing_keys_secret,
)
from .namespace import RESTRICTED_NAMESPACE_LABELS, missing_pod_security_labels, org_mismatch
from .naming import (
    APP_NAME,
    COMPONENT,
    CONFIG_APPLIED_ANNOTATION,
    CONFIG_FILE,
    CONFIG_HASH_ANNOTATION,
    MANAGED_BY,
    PART_OF,
    REVOKE_TOKEN_ANNOTATION,
    ROTATE_TOKEN_ANNOTATION,
    TOKEN_EXPIRES_ANNOTATION,
    BuildError,
    Manifest,
    agent_endpoint,
    agent_id,
    agent_name,
    callback_secret_name,
    config_map_name,
    desired_replicas,
    label_selector,
    labels,
    namespace_of,
    owned_by,
    owner_reference,
    selector_labels,
    token_secret_name,
)
from .network import PLATFORM_POD_LABELS, ApiServerEndpoint, api_server_endpoints, network_policy
from .rbac import (
    AGENT_RBAC_RULES,
    ORG_SECRETS_BINDING,
    ORG_SECRETS_CLUSTER_ROLE,
    org_secrets_role_binding,
    role,
    role_binding,
    service_account,
)
from .workload import (
    CALLBACK_DIR,
    CONFIG_DIR,
    CONTAINER_NAME,
    HEALTH_PATH,
    KUBE_API_DIR,
    PORT_NAME,
    READ_ONLY_FILE_MODE,
    SECRETS_DIR,
    STATE_DIR,
    TOKEN_DIR,
    container_resources,
    deployment,
    pod_template,
    scheduling,
    service,
)

__all__ = [
    "AGENT_RBAC_RULES",
    "APP_NAME",
    "CALLBACK_DIR",
    "CALLBACK_KEY",
    "COMPONENT",
    "CONFIG_APPLIED_ANNOTATION",
    "CONFIG_DIR",
    "CONFIG_FILE",
    "CONFIG_HASH_ANNOTATION",
    "CONTAINER_NAME",
    "HEALTH_PATH",
    "JWKS_FILE",
    "KUBE_API_DIR",
    "MANAGED_BY",
    "ORG_SECRETS_BINDING",
    "ORG_SECRETS_CLUSTER_ROLE",
    "PART_OF",
    "PLATFORM_POD_LABELS",
    "PORT_NAME",
    "READ_ONLY_FILE_MODE",
    "RESTRICTED_NAMESPACE_LABELS",
    "REVOKE_TOKEN_ANNOTATION",
    "ROTATE_TOKEN_ANNOTATION",
    "SECRETS_DIR",
    "SIGNING_KEYS_INDEX",
    "STATE_DIR",
    "TOKEN_DIR",
    "TOKEN_EXPIRES_ANNOTATION",
    "ApiServerEndpoint",
    "BuildError",
    "Manifest",
    "agent_config",
    "agent_endpoint",
    "agent_id",
    "agent_name",
    "api_server_endpoints",
    "callback_key_secret",
    "callback_secret",
    "callback_secret_name",
    "canonical_config",
    "children",
    "config_hash",
    "config_map",
    "config_map_name",
    "container_resources",
    "deployment",
    "desired_replicas",
    "event",
    "jwks_config_map",
    "label_selector",
    "labels",
    "missing_pod_security_labels",
    "namespace_of",
    "network_policy",
    "org_mismatch",
    "org_secrets_role_binding",
    "owned_by",
    "owner_reference",
    "platform_ca_config_map",
    "pod_template",
    "read_signing_keys_secret",
    "revocations_config_map",
    "role",
    "role_binding",
    "scheduling",
    "selector_labels",
    "service",
    "service_account",
    "signing_keys_secret",
    "token_secret",
    "token_secret_name",
]


def children(
    instance: AgentInstance,
    settings: OperatorSettings,
    token: MintedToken,
    callback_secret_value: str,
    api_server: Sequence[ApiServerEndpoint] = (),
    platform_ca: str | None = None,
) -> list[Manifest]:
    """Every child of the AgentInstance, in the order to apply them: identity and RBAC,
    secrets and configuration (and the platform's CA bundle, when given), the
    NetworkPolicy before any pod can start, the Service, and last the Deployment."""
    trust = [] if platform_ca is None else [platform_ca_config_map(instance, platform_ca)]
    return [
        service_account(instance),
        role(instance),
        role_binding(instance),
        token_secret(instance, token),
        callback_secret(instance, callback_secret_value),
        config_map(instance),
        *trust,
        network_policy(instance, settings, api_server),
        service(instance, settings),
        deployment(instance, settings),
    ]
