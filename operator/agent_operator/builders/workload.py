"""The agent's workload: the hardened pod template (restricted Pod Security Standard),
the Deployment and the Service."""

from __future__ import annotations

from typing import Any

from humanwork_core.resources import (
    AgentInstance,
    AgentInstanceSpec,
)

from ..config import OperatorSettings
from ..shards import SHARD_LABEL
from .configuration import PLATFORM_CA_FILE
from .naming import (
    CONFIG_FILE,
    Manifest,
    _metadata,
    agent_id,
    agent_name,
    callback_secret_name,
    config_map_name,
    desired_replicas,
    labels,
    namespace_of,
    platform_ca_name,
    selector_labels,
    token_secret_name,
)

CONTAINER_NAME = "agent"


PORT_NAME = "http"


METRICS_PORT_NAME = "metrics"
"""The container port of the agent's Prometheus metrics (when `agent_metrics_port` is set)."""


HEALTH_PATH = "/v1/health"


SECRETS_DIR = "/var/run/humanwork"


TOKEN_DIR = f"{SECRETS_DIR}/token"


CALLBACK_DIR = f"{SECRETS_DIR}/callback"


CONFIG_DIR = f"{SECRETS_DIR}/config"


PLATFORM_CA_DIR = f"{SECRETS_DIR}/platform-ca"


KUBE_API_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


STATE_DIR = "/tmp/humanwork-agent"
"""The agent's checkpoints (on the pod's `tmp` emptyDir: they survive a container restart)."""


READ_ONLY_FILE_MODE = 0o440


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
        *_metrics_env(settings),
        *_traces_env(settings),
        *_tool_path_env(settings),
        *_platform_ca_env(settings),
    ]


# --- the platform's CA: the agent verifies the platform's certificate with it ----------------


def _platform_ca_env(settings: OperatorSettings) -> list[dict[str, Any]]:
    if not settings.platform_ca_file:
        return []
    return [
        {"name": "HUMANWORK_PLATFORM_CA_FILE", "value": f"{PLATFORM_CA_DIR}/{PLATFORM_CA_FILE}"}
    ]


def _platform_ca_volume(
    instance: AgentInstance, settings: OperatorSettings
) -> list[dict[str, Any]]:
    if not settings.platform_ca_file:
        return []
    source = {"name": platform_ca_name(instance), "defaultMode": READ_ONLY_FILE_MODE}
    return [{"name": "platform-ca", "configMap": source}]


def _platform_ca_mount(settings: OperatorSettings) -> list[dict[str, Any]]:
    if not settings.platform_ca_file:
        return []
    return [{"name": "platform-ca", "mountPath": PLATFORM_CA_DIR, "readOnly": True}]


# --- the agent's metrics ------------------------------------------------------------------


def _metrics_env(settings: OperatorSettings) -> list[dict[str, Any]]:
    if not settings.agent_metrics_port:
        return []
    return [{"name": "HUMANWORK_AGENT_METRICS_PORT", "value": str(settings.agent_metrics_port)}]


def _tool_path_env(settings: OperatorSettings) -> list[dict[str, Any]]:
    """`HUMANWORK_TOOL_PATH` when the agents call their tools other than natively."""
    if settings.agent_tool_path == "native":
        return []
    return [{"name": "HUMANWORK_TOOL_PATH", "value": settings.agent_tool_path}]


def _traces_env(settings: OperatorSettings) -> list[dict[str, Any]]:
    """The standard OTLP variables when the agents export traces (`agent_traces_endpoint`)."""
    if not settings.agent_traces_endpoint:
        return []
    return [
        {"name": "OTEL_EXPORTER_OTLP_ENDPOINT", "value": settings.agent_traces_endpoint},
        {"name": "OTEL_SERVICE_NAME", "value": "humanwork-agent"},
    ]


def container_ports(settings: OperatorSettings) -> list[dict[str, Any]]:
    """The command port (`http`) and, when the agents serve metrics, `metrics`."""
    ports = [{"name": PORT_NAME, "containerPort": settings.agent_port, "protocol": "TCP"}]
    if settings.agent_metrics_port:
        ports.append(
            {
                "name": METRICS_PORT_NAME,
                "containerPort": settings.agent_metrics_port,
                "protocol": "TCP",
            }
        )
    return ports


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
        *_platform_ca_volume(instance, settings),
    ]


def _volume_mounts(settings: OperatorSettings) -> list[dict[str, Any]]:
    return [
        {"name": "platform-token", "mountPath": TOKEN_DIR, "readOnly": True},
        {"name": "callback-secret", "mountPath": CALLBACK_DIR, "readOnly": True},
        {"name": "agent-config", "mountPath": CONFIG_DIR, "readOnly": True},
        {"name": "kube-api-access", "mountPath": KUBE_API_DIR, "readOnly": True},
        {"name": "tmp", "mountPath": "/tmp"},
        *_platform_ca_mount(settings),
    ]


def _probe(period_seconds: int, initial_delay_seconds: int, failures: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": HEALTH_PATH, "port": PORT_NAME, "scheme": "HTTP"},
        "initialDelaySeconds": initial_delay_seconds,
        "periodSeconds": period_seconds,
        "timeoutSeconds": 2,
        "failureThreshold": failures,
    }


def pod_template(instance: AgentInstance, settings: OperatorSettings) -> dict[str, Any]:
    """The hardened agent pod (meets the `restricted` Pod Security Standard)."""
    uid = settings.agent_run_as_user
    seccomp = {"type": "RuntimeDefault"}
    container = {
        "name": CONTAINER_NAME,
        "image": instance.spec.image or settings.agent_image,
        "imagePullPolicy": settings.agent_image_pull_policy,
        "ports": container_ports(settings),
        "env": _env(instance, settings),
        "resources": container_resources(instance.spec, settings),
        "volumeMounts": _volume_mounts(settings),
        "livenessProbe": _probe(period_seconds=10, initial_delay_seconds=5, failures=3),
        # probed every 2 s from 1 s after the start, a new agent is Ready within 2 s of
        # answering (every 5 s from 2 s made it wait up to 5 s more, as
        # bench/real_node/agent_pods.py measures); six failures (12 s) before it leaves
        # the Service, near the 15 s of before
        "readinessProbe": _probe(period_seconds=2, initial_delay_seconds=1, failures=6),
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
    """The agent's Deployment; labelled with the operator's shard, if named, so that the
    shard's watch of its Deployments (:mod:`agent_operator.deployment_watch`) is given
    its own alone (not its pod template: moving an org to another shard restarts no pod)."""
    metadata = _metadata(instance, agent_name(instance))
    if settings.shard:
        metadata["labels"][SHARD_LABEL] = settings.shard
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
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
