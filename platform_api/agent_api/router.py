"""Agent-facing endpoints (prefix `/v1/agent-api`), authenticated by the agent token only:
who the caller is, and the request for an early token rotation."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter

from platform_api.agent_api.auth import CurrentAgent
from platform_api.errors import KubernetesUnavailable
from platform_api.state import PlatformDep

router = APIRouter(prefix="/v1/agent-api", tags=["agent api"])
ROTATE_ANNOTATION = "humanwork.io/rotate-token"


@router.get("/whoami", summary="The authenticated agent")
async def whoami(agent: CurrentAgent) -> dict[str, Any]:
    """The agent the token stands for: its id, org and scopes."""
    return {
        "agentId": agent.agent_id,
        "orgId": agent.org_id,
        "namespace": agent.namespace,
        "scopes": sorted(agent.scopes),
    }


@router.post("/token/refresh", status_code=202, summary="Ask for a new token now")
async def refresh_token(agent: CurrentAgent, platform: PlatformDep) -> dict[str, Any]:
    """Asks the operator to rotate this agent's token at once (it annotates the
    AgentInstance with `humanwork.io/rotate-token`); the new token reaches the agent
    through its mounted Secret, and the current one stays valid for its grace period."""
    if platform.kube is None:
        raise KubernetesUnavailable("the agent API needs the Kubernetes API")
    requested = datetime.now(UTC).isoformat()
    await platform.kube.annotate_agent_instance(
        agent.namespace, agent.name, {ROTATE_ANNOTATION: requested}
    )
    return {"agentId": agent.agent_id, "rotationRequestedAt": requested}
