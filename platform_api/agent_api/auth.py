"""Who an agent is: its bearer token, verified the way DESIGN section 4 says.

The signature is checked with the public keys the operator publishes (the ConfigMap
`humanwork-agent-jwks` in the platform's namespace, cached briefly and re-read when a
token names an unknown key), then audience, expiry, role and scopes; then the token must
still be its AgentInstance's current one, or the previous one within its grace, and name
the instance's org; and its jti must not be in the operator's revocation list. The
AgentInstance is read on every request, so a deleted or rotated-out token is refused at
once; and while the instance carries the annotation `humanwork.io/revoke-token` (an org
admin revoked its token, the operator has not yet issued the next one) every token of it is
refused.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import Depends
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from humanwork_core import keys, tokens
from platform_api.agent_api.identity import Agent
from platform_api.agent_api.rotations import Rotations
from platform_api.db import Sessions
from platform_api.deactivation.repository import deactivated_now
from platform_api.errors import KubernetesUnavailable, Unauthenticated
from platform_api.kube.client import KubeClient, KubeNotFound
from platform_api.kube.published import PLATFORM_NAMESPACE, AgentKeys, AgentKeysDep
from platform_api.openapi import AGENT_TOKEN, mark
from platform_api.state import AppSettings, MaybeKube

REVOCATIONS_CONFIG_MAP = "humanwork-agent-revocations"
REVOKE_TOKEN_ANNOTATION = keys.REVOKE_TOKEN


def _accepted_jtis(instance: dict[str, Any], now: datetime) -> set[str]:
    token: dict[str, Any] = (instance.get("status") or {}).get("token") or {}
    accepted = {str(token["jti"])} if token.get("jti") else set()
    grace = token.get("previousGraceEndsAt")
    if token.get("previousJti") and grace and datetime.fromisoformat(str(grace)) > now:
        accepted.add(str(token["previousJti"]))
    return accepted


async def authenticate(
    kube: KubeClient,
    published: AgentKeys,
    authorization: str | None,
    audience: str,
    now: datetime,
) -> Agent:
    """The agent behind `Authorization: Bearer <token>`, or Unauthenticated with the
    token error's code; `published` caches the operator's verification keys."""
    if not authorization or not authorization.lower().startswith("bearer "):
        raise Unauthenticated("an agent token is required", reason="token_missing")
    token = authorization[7:].strip()
    keys = await published.get(kube)
    try:
        header_kid = tokens.read_minted_token(token).claims.kid
    except tokens.TokenError as exc:
        raise Unauthenticated("the agent token is malformed", reason=exc.code) from None
    if header_kid not in keys.kids:
        keys = await published.get(kube, refresh=True)  # a key published a moment ago
    try:
        claims = tokens.verify_agent_token(token, keys, audience=audience, now=now)
    except tokens.TokenError as exc:
        raise Unauthenticated("the agent token was refused", reason=exc.code) from None
    namespace, _, name = claims.subject.partition("/")
    try:
        instance = await kube.get_agent_instance(namespace, name)
    except KubeNotFound:
        raise Unauthenticated("the agent no longer exists", reason="token_revoked") from None
    spec_org = str((instance.get("spec") or {}).get("orgId", ""))
    if claims.org_id != spec_org:
        raise Unauthenticated("the token names another org", reason="token_wrong_org")
    if claims.jti not in _accepted_jtis(instance, now):
        raise Unauthenticated("the token was rotated out", reason="token_revoked")
    if REVOKE_TOKEN_ANNOTATION in ((instance.get("metadata") or {}).get("annotations") or {}):
        raise Unauthenticated("the token was revoked", reason="token_revoked")
    try:
        revoked = await kube.config_map_data(PLATFORM_NAMESPACE, REVOCATIONS_CONFIG_MAP)
    except KubeNotFound:  # nothing was ever revoked
        revoked = {}
    if f"jti.{claims.jti}" in revoked:
        raise Unauthenticated("the token was revoked", reason="token_revoked")
    return Agent(
        agent_id=claims.subject,
        namespace=namespace,
        name=name,
        org_id=claims.org_id,
        scopes=frozenset(claims.scopes),
        jti=claims.jti,
        enabled_tools=frozenset((instance.get("spec") or {}).get("enabledTools") or ()),
    )


agent_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="AgentToken",
    description="the agent's token, from the Secret mounted in its pod",
)


async def current_agent(
    kube: MaybeKube,
    agent_keys: AgentKeysDep,
    settings: AppSettings,
    sessions: Sessions,
    rotations: Rotations,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(agent_bearer)],
) -> Agent:
    if kube is None:
        raise KubernetesUnavailable("the agent API needs the Kubernetes API")
    header = f"Bearer {credentials.credentials}" if credentials else None
    agent = await authenticate(
        kube,
        agent_keys,
        header,
        settings.agent_token_audience,
        datetime.now(UTC),
    )
    # a deactivated org's tokens are refused at once, on every replica
    if await deactivated_now(sessions, agent.org_id):
        raise Unauthenticated("the org is deactivated", reason="token_revoked", org="deactivated")
    # a token seen for the first time is a rotation, audited by its hash
    assert credentials is not None  # authenticate refuses a request without one
    await rotations.observe(sessions, agent, credentials.credentials)
    return agent


CurrentAgent = Annotated[Agent, Depends(mark(current_agent, [AGENT_TOKEN]))]
