"""The labels and annotations the components share, each spelled once.

Who writes each one: the platform API writes `CANCEL_REQUESTED`, `ARCHIVED` and
`CONFIG_APPLIED` (from the agent's signed `config.applied` event) and `ROTATE_TOKEN`
(an agent's refresh request); the operator writes `CONFIG_HASH` and `TOKEN_EXPIRES_AT`
and acts on the others; the agent labels and annotates the tasks it creates
(`AGENT_LABEL`, `PLANNER`, `MODEL`, `MODE`, `IDEMPOTENCY_KEY`). The API group, version and
the org label live with the resource models (`humanwork_core.resources.common`).
"""

from __future__ import annotations

from collections.abc import Mapping

from .resources.common import GROUP, ORG_ID_LABEL

__all__ = [
    "AGENT_LABEL",
    "ARCHIVED",
    "CANCEL_REQUESTED",
    "CONFIG_APPLIED",
    "CONFIG_HASH",
    "IDEMPOTENCY_KEY",
    "MODE",
    "MODEL",
    "ORG_ID_LABEL",
    "PLANNER",
    "RESTRICTED_NAMESPACE_LABELS",
    "REVOKE_TOKEN",
    "ROTATE_TOKEN",
    "ROUTED_BY",
    "ROUTING_REASON",
    "TOKEN_EXPIRES_AT",
]

RESTRICTED_NAMESPACE_LABELS: Mapping[str, str] = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
    "pod-security.kubernetes.io/warn": "restricted",
    "pod-security.kubernetes.io/audit": "restricted",
}
"""On an org namespace: the `restricted` Pod Security Standard, enforced, warned and
audited. The platform creates org namespaces with them; the operator adds those a
namespace lacks (one created by hand), so a platform-made org costs it no write."""
ROTATE_TOKEN = f"{GROUP}/rotate-token"
"""On an AgentInstance: mint a new token now (the previous one keeps its grace)."""
REVOKE_TOKEN = f"{GROUP}/revoke-token"
"""On an AgentInstance, set (any value) by an org admin through the platform or kubectl: the
current token (and any previous one still in its grace) is revoked at once and a new one
minted, with no grace."""
CONFIG_HASH = f"{GROUP}/config-hash"
"""On the agent's pod template: the configuration the pods were started with."""
CONFIG_APPLIED = f"{GROUP}/config-applied"
"""On an AgentInstance: the configuration hash the agent reported it loaded."""
TOKEN_EXPIRES_AT = f"{GROUP}/token-expires-at"
"""On the token Secret: when the token in it expires."""
ARCHIVED = f"{GROUP}/archived"
"""On a finished AgenticTask: the platform saved it; the operator may remove it after the TTL."""
CANCEL_REQUESTED = f"{GROUP}/cancel-requested"
"""On an AgenticTask: who asked to cancel it and when; the operator moves it to Cancelled."""
AGENT_LABEL = f"{GROUP}/agent"
"""On an AgenticTask: the AgentInstance that created it."""
PLANNER = f"{GROUP}/planner"
MODEL = f"{GROUP}/model"
MODE = f"{GROUP}/mode"
"""On an AgenticTask: how the agent made the plan (offline or llm, the model, the mode)."""
ROUTED_BY = f"{GROUP}/routed-by"
ROUTING_REASON = f"{GROUP}/routing-reason"
"""On an AgenticTask planned through the router (`POST /orgs/{id}/tasks`): how the platform
chose the agent (keywords, llm or default) and why; admission lets only the platform API
write them (manifests/base/policies/agent-task-identity.yaml)."""
IDEMPOTENCY_KEY = f"{GROUP}/idempotency-key"
"""On an AgenticTask: the key of the plan request that created it."""
