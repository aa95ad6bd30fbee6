"""What the operator publishes in the platform's namespace and the platform reads back,
cached briefly: the agents' token verification keys (ConfigMap `humanwork-agent-jwks`) and
the installation's callback master key (Secret `humanwork-callback-key`). One instance of
each is built once by the app and handed out by its slot (`AGENT_KEYS`, `CALLBACK_KEYS`),
never held in a module global."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Annotated

from fastapi import Depends

from humanwork_core import tokens
from platform_api.kube.client import KubeClient, KubeNotFound
from platform_api.slots import Slot

PLATFORM_NAMESPACE = "humanwork-system"
JWKS_CONFIG_MAP = "humanwork-agent-jwks"
KEYS_TTL_SECONDS = 5.0
KEYS_REFRESH_SECONDS = 1.0
"""A token naming an unknown key re-reads the keys at most once in this many seconds."""
CALLBACK_KEY_SECRET = "humanwork-callback-key"
CALLBACK_KEY = "key"
KEY_TTL_SECONDS = 30.0


class AgentKeys:
    """The operator's published verification keys, re-read every few seconds; a token
    naming a key not among them (one published a moment ago) asks for a re-read, which
    happens at most once every `KEYS_REFRESH_SECONDS`, so tokens with invented key ids
    cannot make the platform read the ConfigMap on every request. Concurrent readers
    share one read."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._keys: tokens.KeySet | None = None
        self._read_at = 0.0
        self._clock = clock
        self._lock = asyncio.Lock()

    def _due(self, refresh: bool) -> bool:
        age = self._clock() - self._read_at
        return (
            self._keys is None
            or age > KEYS_TTL_SECONDS
            or (refresh and age >= KEYS_REFRESH_SECONDS)
        )

    async def get(self, kube: KubeClient, *, refresh: bool = False) -> tokens.KeySet:
        if self._due(refresh):
            async with self._lock:
                if self._due(refresh):  # another reader may have read them meanwhile
                    await self._read(kube)
        assert self._keys is not None
        return self._keys

    async def _read(self, kube: KubeClient) -> None:
        try:
            data = await kube.config_map_data(PLATFORM_NAMESPACE, JWKS_CONFIG_MAP)
        except KubeNotFound:  # the operator has not published any key yet
            data = {}
        self._keys = tokens.KeySet.from_jwks(json.loads(data.get("jwks.json", '{"keys":[]}')))
        self._read_at = self._clock()


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


AGENT_KEYS: Slot[AgentKeys] = Slot("agent_keys")
AgentKeysDep = Annotated[AgentKeys, Depends(AGENT_KEYS)]
"""The operator's published token verification keys, cached briefly."""

CALLBACK_KEYS: Slot[CallbackKey] = Slot("callback_key")
CallbackKeyDep = Annotated[CallbackKey, Depends(CALLBACK_KEYS)]
"""The installation's callback master key, cached briefly."""
