"""What the operator publishes in the platform's namespace and the platform reads back,
cached briefly: the agents' token verification keys (ConfigMap `humanwork-agent-jwks`) and
the installation's callback master key (Secret `humanwork-callback-key`). One instance of
each lives on the `Platform` object, never in a module global."""

from __future__ import annotations

import json
import time

from humanwork_core import tokens
from platform_api.kube.client import KubeClient, KubeNotFound

PLATFORM_NAMESPACE = "humanwork-system"
JWKS_CONFIG_MAP = "humanwork-agent-jwks"
KEYS_TTL_SECONDS = 5.0
CALLBACK_KEY_SECRET = "humanwork-callback-key"
CALLBACK_KEY = "key"
KEY_TTL_SECONDS = 30.0


class AgentKeys:
    """The operator's published verification keys, re-read at most every few seconds."""

    def __init__(self) -> None:
        self._keys: tokens.KeySet | None = None
        self._read_at = 0.0

    async def get(self, kube: KubeClient, *, refresh: bool = False) -> tokens.KeySet:
        stale = time.monotonic() - self._read_at > KEYS_TTL_SECONDS
        if self._keys is None or stale or refresh:
            try:
                data = await kube.config_map_data(PLATFORM_NAMESPACE, JWKS_CONFIG_MAP)
            except KubeNotFound:  # the operator has not published any key yet
                data = {}
            self._keys = tokens.KeySet.from_jwks(json.loads(data.get("jwks.json", '{"keys":[]}')))
            self._read_at = time.monotonic()
        return self._keys


class CallbackKey:
    """The installation's callback master key, re-read at most every 30 seconds (and at
    once when a signature does not verify, in case the key was rotated)."""

    def __init__(self) -> None:
        self._key: str | None = None
        self._read_at = 0.0

    async def get(self, kube: KubeClient, *, refresh: bool = False) -> str | None:
        stale = time.monotonic() - self._read_at > KEY_TTL_SECONDS
        if self._key is None or stale or refresh:
            try:
                self._key = await kube.secret_value(
                    PLATFORM_NAMESPACE, CALLBACK_KEY_SECRET, CALLBACK_KEY
                )
            except KubeNotFound:  # no operator has run yet: no agent can sign anything
                self._key = None
            self._read_at = time.monotonic()
        return self._key
