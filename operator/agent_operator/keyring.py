"""The operator's key material and token revocations: the signing keys (generated once,
published as a JWKS), the callback master key, and the revocation list the platform API
reads."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

from agent_operator import builders
from agent_operator.config import OperatorSettings
from agent_operator.kube import Kube, KubeError
from agent_operator.token_plan import LONGEST_TOKEN_TTL, Keyring, revoked_tokens
from humanwork_core import tokens
from humanwork_core.resources import AgentInstance
from humanwork_core.signing import generate_secret


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def _decode(secret: dict[str, Any] | None, key: str) -> str | None:
    if not secret:
        return None
    raw = (secret.get("data") or {}).get(key)
    return base64.b64decode(raw).decode() if raw else None


async def ensure_keyring(kube: Kube, settings: OperatorSettings, now: datetime) -> Keyring:
    """Load the signing keys, generating the first one when there is none, and publish the
    public keys that may still verify a live token as a JWKS ConfigMap."""
    ns, name = settings.platform_namespace, settings.signing_keys_secret
    secret = await kube.get("v1", "Secret", ns, name)
    if secret is None:
        keys = [(tokens.generate_signing_key(), now)]
        try:
            await kube.create(builders.signing_keys_secret(keys, settings), answer=False)
        except KubeError as exc:
            if exc.status != 409:
                raise
            secret = await kube.get("v1", "Secret", ns, name)  # another replica was first
    if secret is not None:
        keys = builders.read_signing_keys_secret(secret.get("data") or {})
    retention = tokens.key_retention(keys, LONGEST_TOKEN_TTL, now)
    await kube.apply(builders.jwks_config_map(retention.publish, settings), answer=False)
    return Keyring(
        current=retention.current,
        published=retention.publish,
        callback_key=await ensure_callback_key(kube, settings),
    )


async def ensure_callback_key(kube: Kube, settings: OperatorSettings) -> str:
    """The callback master key, generated once (the first replica to create it wins)."""
    ns, name = settings.platform_namespace, settings.callback_key_secret
    secret = await kube.get("v1", "Secret", ns, name)
    if secret is None:
        try:
            secret = await kube.create(builders.callback_key_secret(generate_secret(), settings))
        except KubeError as exc:
            if exc.status != 409:
                raise
            secret = await kube.get("v1", "Secret", ns, name)  # another replica was first
    key = _decode(secret, builders.CALLBACK_KEY)
    if not key:
        raise KubeError(500, "Invalid", f"Secret {ns}/{name} holds no {builders.CALLBACK_KEY!r}")
    return key


REVOCATIONS_KEY_PREFIX = "jti."


async def revoke(kube: Kube, settings: OperatorSettings, body: dict[str, Any]) -> list[str]:
    """Record the tokens of a deleted AgentInstance as revoked, in the ConfigMap the platform
    API watches (`<jti>` -> expiry), and drop entries whose tokens have expired anyway."""
    instance = AgentInstance.model_validate(body)
    token = instance.status.token if instance.status else None
    if token is None:
        return []
    revoked = revoked_tokens(token, None, _now())
    await record_revocations(kube, settings, revoked)
    return sorted(revoked)


async def record_revocations(
    kube: Kube, settings: OperatorSettings, revoked: dict[str, datetime]
) -> None:
    """Add `revoked` (jti -> expiry) to the revocation list the platform API reads, and drop
    entries whose tokens have expired anyway."""
    now = _now()
    ns, name = settings.platform_namespace, settings.revocations_config_map
    current = await kube.get("v1", "ConfigMap", ns, name)
    if current is None:
        try:
            current = await kube.create(builders.revocations_config_map(settings))
        except KubeError as exc:
            if exc.status != 409:
                raise
            current = await kube.get("v1", "ConfigMap", ns, name) or {}
    data: dict[str, str | None] = {
        REVOCATIONS_KEY_PREFIX + jti: expires.isoformat() for jti, expires in revoked.items()
    }
    for key, value in ((current or {}).get("data") or {}).items():
        try:
            if datetime.fromisoformat(value) <= now:
                data[key] = None
        except ValueError:
            data[key] = None
    await kube.merge_patch("v1", "ConfigMap", ns, name, {"data": data}, answer=False)
