"""Agent-facing endpoints (prefix `/v1/agent-api`), authenticated by the agent token only:
who the caller is, and the request for an early token rotation."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter

from platform_api.agent_api.auth import CurrentAgent
from platform_api.agent_api.schemas import AgentIdentity, RotationRequested
from platform_api.errors import KubernetesUnavailable, error_responses
from platform_api.state import PlatformDep

router = APIRouter(prefix="/v1/agent-api", tags=["agent api"])
ROTATE_ANNOTATION = "humanwork.io/rotate-token"


UNAVAILABLE = {503: ("kubernetes_unavailable", "no Kubernetes API is configured")}
AGENT_ERRORS = error_responses(401, 422, 503, codes=UNAVAILABLE)


@router.get(
    "/whoami",
    summary="The authenticated agent",
    description="Agent token only. 401 `unauthenticated` (details.reason: the token error, "
    "e.g. token_expired, token_revoked) for any token that is not the agent's current one.",
    responses=AGENT_ERRORS,
)
async def whoami(agent: CurrentAgent) -> AgentIdentity:
    """The agent the token stands for: its id, org and scopes."""
    return AgentIdentity(
        agentId=agent.agent_id,
        orgId=agent.org_id,
        namespace=agent.namespace,
        scopes=sorted(agent.scopes),
    )


@router.post(
    "/token/refresh",
    status_code=202,
    summary="Ask for a new token now",
    description="Agent token only. The operator rotates the token at once; the current "
    "one stays valid for its grace period.",
    responses=AGENT_ERRORS,
)
async def refresh_token(agent: CurrentAgent, platform: PlatformDep) -> RotationRequested:
    """Asks the operator to rotate this agent's token at once (it annotates the
    AgentInstance with `humanwork.io/rotate-token`); the new token reaches the agent
    through its mounted Secret, and the current one stays valid for its grace period."""
    if platform.kube is None:
        raise KubernetesUnavailable("the agent API needs the Kubernetes API")
    requested = datetime.now(UTC).isoformat()
    await platform.kube.annotate_agent_instance(
        agent.namespace, agent.name, {ROTATE_ANNOTATION: requested}
    )
    return RotationRequested(agentId=agent.agent_id, rotationRequestedAt=requested)
