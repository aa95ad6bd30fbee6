"""The agent's configuration (ConfigMap and its hash) and its per-instance Secrets
(platform token, callback secret)."""

from __future__ import annotations

import hashlib
from typing import Any

from humanwork_core.resources import (
    AgentInstance,
    AgentInstanceSpec,
)
from humanwork_core.runtime_config import AgentRuntimeConfig
from humanwork_core.tokens import MintedToken

from .naming import (
    CONFIG_FILE,
    CONFIG_HASH_ANNOTATION,
    TOKEN_EXPIRES_ANNOTATION,
    BuildError,
    Manifest,
    _b64,
    _metadata,
    _rfc3339,
    callback_secret_name,
    config_map_name,
    platform_ca_name,
    token_secret_name,
)


def agent_config(spec: AgentInstanceSpec) -> dict[str, Any]:
    """The configuration the agent hot-reloads (`humanwork_core.runtime_config`, the model
    the agent parses it with): persona, model, thresholds and tools only."""
    return AgentRuntimeConfig.of_instance(spec).wire()


def canonical_config(spec: AgentInstanceSpec) -> str:
    """:func:`agent_config` as canonical JSON (sorted keys, no spaces, UTF-8 as is)."""
    return AgentRuntimeConfig.of_instance(spec).canonical_json()


def config_hash(spec: AgentInstanceSpec) -> str:
    """SHA-256 (hex) of the canonical configuration: scaling, pausing, resources or token
    policy changes leave it unchanged; the agent recomputes it from `config.json`."""
    return hashlib.sha256(canonical_config(spec).encode("utf-8")).hexdigest()


def token_secret(instance: AgentInstance, token: MintedToken) -> Manifest:
    """The agent's platform token (`token`) and its `kid`, `jti` and `expiresAt`."""
    claims = token.claims
    expires = _rfc3339(claims.expires_at)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": _metadata(
            instance, token_secret_name(instance), {TOKEN_EXPIRES_ANNOTATION: expires}
        ),
        "data": {
            "token": _b64(token.token),
            "kid": _b64(claims.kid),
            "jti": _b64(claims.jti),
            "expiresAt": _b64(expires),
        },
    }


def callback_secret(instance: AgentInstance, secret: str) -> Manifest:
    """The per-instance HMAC secret of the callbacks, under `secret`."""
    if not secret:
        raise BuildError("the callback secret must not be empty", name=instance.metadata.name)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": _metadata(instance, callback_secret_name(instance)),
        "data": {"secret": _b64(secret)},
    }


def config_map(instance: AgentInstance) -> Manifest:
    """`config.json` (canonical JSON of :func:`agent_config`) and its `configHash`."""
    digest = config_hash(instance.spec)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(
            instance, config_map_name(instance), {CONFIG_HASH_ANNOTATION: digest}
        ),
        "data": {CONFIG_FILE: canonical_config(instance.spec), "configHash": digest},
    }


PLATFORM_CA_FILE = "ca.crt"


def platform_ca_config_map(instance: AgentInstance, bundle: str) -> Manifest:
    """The CA bundle the agent verifies the platform's certificate with (not secret)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(instance, platform_ca_name(instance)),
        "data": {PLATFORM_CA_FILE: bundle},
    }
