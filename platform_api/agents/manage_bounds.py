"""The agent bounds on the platform's AgentInstance write path: before an org admin's spec
reaches the API server, it is checked against the bounds the platform team set, read from
the admission parameters (the ConfigMap humanwork-system/humanwork-admission, the one
source of truth the admission policy humanwork-agent-instance-bounds reads too), on every
write (no cache: a change of the bounds holds at once, on every replica). Beyond them: 422
`agent_bounds_exceeded` naming the field and the bound, nothing written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from humanwork_core import agent_bounds
from humanwork_core.kube_errors import KubeNotFound
from platform_api.errors import AgentBoundsExceeded, Unavailable
from platform_api.kube.client import KubeClient
from platform_api.kube.published import PLATFORM_NAMESPACE


async def read_bounds(kube: KubeClient) -> agent_bounds.AgentBounds:
    """The bounds as the ConfigMap sets them (its defaults where it names none; without
    the ConfigMap the API server refuses every AgentInstance write anyway)."""
    try:
        data = await kube.config_map_data(PLATFORM_NAMESPACE, agent_bounds.PARAMS_CONFIG_MAP)
    except KubeNotFound:
        data = {}
    try:
        return agent_bounds.AgentBounds.from_params(data)
    except agent_bounds.BoundsError as exc:
        raise Unavailable("the agent bounds of the admission parameters do not read") from exc


async def check_bounds(kube: KubeClient, spec: Mapping[str, Any]) -> None:
    """422 `agent_bounds_exceeded` when `spec` (camelCase) is beyond the bounds."""
    found = agent_bounds.check(spec, await read_bounds(kube))
    if found:
        first = found[0]
        raise AgentBoundsExceeded(
            f"{first.field} is beyond the agent bounds: {first.message}",
            violations=[{"field": v.field, "bound": v.bound, "message": v.message} for v in found],
            field=first.field,
            bound=first.bound,
        )
