"""Helpers for tests that work with AgentInstances: manifests, reads and waits on the
real control plane (the `org` and `ready_agent` fixtures are in tests/fixtures/stack.py)."""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Iterator
from typing import Any

from kubernetes import client

from tests.conftest import Cluster
from tests.support import eventually

GROUP, VERSION, PLURAL = "humanwork.io", "v1alpha1", "agentinstances"
LLM_KEY = "sk-test-llm-key"
"""The value of the LLM key Secret (`llm`, key `api-key`) of every test org."""


def instance_manifest(ns: str, org_id: str, name: str = "agent", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "AgentInstance",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "orgId": org_id,
            "specialist": {"name": "Bob", "systemPrompt": "You reconcile orders."},
            "model": "openai/gpt-4o",
            "enabledTools": ["shopify_query"],
            "replicas": 1,
            "llm": {
                "baseURL": "https://llm.example/v1",
                "apiKeySecretRef": {"name": "llm", "key": "api-key"},
            },
            "egress": {"llmCIDRs": ["203.0.113.0/24"]},
        },
    }
    body["spec"].update(spec)
    return body


def create_instance(cluster: Cluster, ns: str, org_id: str, **kw: Any) -> dict[str, Any]:
    return dict(
        client.CustomObjectsApi(cluster.api).create_namespaced_custom_object(
            GROUP, VERSION, ns, PLURAL, instance_manifest(ns, org_id, **kw)
        )
    )


def get_instance(cluster: Cluster, ns: str, name: str = "agent") -> dict[str, Any]:
    return dict(
        client.CustomObjectsApi(cluster.api).get_namespaced_custom_object(
            GROUP, VERSION, ns, PLURAL, name
        )
    )


def wait_phase(cluster: Cluster, ns: str, phase: str, name: str = "agent") -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        obj = get_instance(cluster, ns, name)
        return obj if (obj.get("status") or {}).get("phase") == phase else None

    result: dict[str, Any] = eventually(reached, timeout=60)
    return result


def wait_rotated(cluster: Cluster, ns: str, old_jti: str, timeout: float) -> dict[str, Any]:
    """The status.token block once it names a jti other than `old_jti`."""

    def rotated() -> dict[str, Any] | None:
        tok: dict[str, Any] = get_instance(cluster, ns)["status"]["token"]
        return tok if tok["jti"] != old_jti else None

    result: dict[str, Any] = eventually(rotated, timeout=timeout)
    return result


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in obj["status"]["conditions"] if c["type"] == kind)


def agent_token(cluster: Cluster, ns: str) -> str:
    """The agent's platform token, as the operator wrote it into its Secret."""
    secret = client.CoreV1Api(cluster.api).read_namespaced_secret("agent-agent-token", ns)
    return base64.b64decode(secret.data["token"]).decode()


def provision_agent(cluster: Cluster, ns: str, org_id: str, **spec: Any) -> dict[str, Any]:
    """An AgentInstance `agent` in the org's namespace (which the platform created), Ready."""
    core = client.CoreV1Api(cluster.api)
    core.create_namespaced_secret(
        ns,
        client.V1Secret(metadata=client.V1ObjectMeta(name="llm"), string_data={"api-key": LLM_KEY}),
    )
    client.CustomObjectsApi(cluster.api).create_namespaced_custom_object(
        "humanwork.io",
        "v1alpha1",
        ns,
        "agentinstances",
        instance_manifest(ns, org_id, **{"enabledTools": ["shopify", "amazon"], **spec}),
    )
    return wait_phase(cluster, ns, "Ready")


def secret_value(cluster: Cluster, ns: str, name: str, key: str) -> str:
    data = client.CoreV1Api(cluster.api).read_namespaced_secret(name, ns).data
    return base64.b64decode(data[key]).decode()


def agent_credentials(cluster: Cluster, ns: str) -> tuple[str, str]:
    """(platform token, callback secret) exactly as mounted into the agent's pod."""
    return (
        secret_value(cluster, ns, "agent-agent-token", "token"),
        secret_value(cluster, ns, "agent-agent-callback", "secret"),
    )


PARAMS = ("humanwork-system", "humanwork-admission")
"""The admission parameters: the identities and the agent bounds (params.yaml)."""


@contextlib.contextmanager
def widened_bounds(cluster: Cluster, **data: str) -> Iterator[None]:
    """The platform team's part: the agent bounds widened (keys of the admission parameters,
    e.g. agentTolerationKeys) as a cluster admin, put back afterwards."""
    core = client.CoreV1Api(cluster.api)
    before = dict(core.read_namespaced_config_map(PARAMS[1], PARAMS[0]).data or {})
    core.patch_namespaced_config_map(PARAMS[1], PARAMS[0], {"data": data})
    try:
        yield
    finally:
        core.patch_namespaced_config_map(
            PARAMS[1], PARAMS[0], {"data": {k: before.get(k) for k in data}}
        )
