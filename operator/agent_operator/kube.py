"""The operator's one door to the Kubernetes API (besides kopf's own watching).

The shared lean client (:mod:`humanwork_core.kube_client`, over aiohttp, kopf's own HTTP
stack) under the operator's field manager and user agent, each request counted by
resource in the operator's metrics; credentials from :mod:`humanwork_core.kube_credentials`
(in a pod its ServiceAccount, else the kubeconfig).
"""

from __future__ import annotations

from agent_operator.metrics import API_REQUESTS
from humanwork_core import kube_client, kube_credentials
from humanwork_core.kube_client import KubeError, path_for, resource_of
from humanwork_core.resources import names

__all__ = ["Kube", "KubeError", "path_for"]

FIELD_MANAGER = names.OPERATOR_FIELD_MANAGER
USER_AGENT = "humanwork-operator/0.1.0"
CONNECTIONS = 32
"""Connections the operator keeps to the API server at most (concurrent reconciles share
them; each TLS connection holds about 128 KiB of buffers, so a pool of 100 cost 12 MiB)."""


def _count(method: str, path: str) -> None:
    API_REQUESTS.labels(method=method, resource=resource_of(path)).inc()


class Kube(kube_client.Kube):
    """Async access to the API server with one connection pool, as the operator."""

    @classmethod
    async def connect(cls, kubeconfig: str | None = None) -> Kube:
        """In-cluster credentials when running in a pod, else the kubeconfig."""
        return cls.open(
            kube_credentials.load(kubeconfig),
            field_manager=FIELD_MANAGER,
            user_agent=USER_AGENT,
            connections=CONNECTIONS,
            on_request=_count,
        )
