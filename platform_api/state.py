"""The running service's shared floor objects (the settings, the Kubernetes client, the
metrics, the HTTP client for the agents), each built once by the app's lifespan and
handed to a route by its own dependency (a `Slot`, see `platform_api.slots`). The
objects a slice owns have their slot in that slice (the sessions in `db`, the token
service in `auth.tokens`, ...); this module imports no slice."""

from __future__ import annotations

from typing import Annotated

import httpx
from fastapi import Depends

from platform_api.errors import KubernetesUnavailable
from platform_api.kube.client import KubeClient
from platform_api.metrics import PlatformMetrics
from platform_api.settings import Settings
from platform_api.slots import Slot

SETTINGS: Slot[Settings] = Slot("settings")
AppSettings = Annotated[Settings, Depends(SETTINGS)]
"""The platform's settings."""

KUBE: Slot[KubeClient | None] = Slot("kube")
MaybeKube = Annotated[KubeClient | None, Depends(KUBE)]
"""The platform's Kubernetes client, None when no Kubernetes API is configured."""

METRICS: Slot[PlatformMetrics] = Slot("metrics")
Metrics = Annotated[PlatformMetrics, Depends(METRICS)]
"""This app's Prometheus metrics."""

AGENT_HTTP: Slot[httpx.AsyncClient] = Slot("agent_http")
AgentHttp = Annotated[httpx.AsyncClient, Depends(AGENT_HTTP)]
"""The platform's client for its agents (signed commands, the routing's model)."""


async def get_kube(kube: MaybeKube) -> KubeClient:
    """The platform's Kubernetes client; 503 `kubernetes_unavailable` when there is none."""
    if kube is None:
        raise KubernetesUnavailable(
            "no Kubernetes API is configured (HUMANWORK_KUBECONFIG or HUMANWORK_KUBE_IN_CLUSTER)"
        )
    return kube


Kube = Annotated[KubeClient, Depends(get_kube)]
