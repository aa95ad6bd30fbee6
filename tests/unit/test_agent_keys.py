"""The published agent keys are re-read for a token naming an unknown key at most once per
`KEYS_REFRESH_SECONDS`, concurrent readers share one read, and the regular re-read every
`KEYS_TTL_SECONDS` stays (a clock the test moves; reads counted on a stand-in client)."""

from __future__ import annotations

import asyncio
import json

from humanwork_core import tokens
from platform_api.kube.published import (
    JWKS_CONFIG_MAP,
    KEYS_REFRESH_SECONDS,
    KEYS_TTL_SECONDS,
    AgentKeys,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Published:
    """Answers the JWKS ConfigMap, slowly, counting the reads."""

    def __init__(self) -> None:
        self.reads = 0
        self.key = tokens.generate_signing_key()

    async def config_map_data(self, namespace: str, name: str) -> dict[str, str]:
        assert name == JWKS_CONFIG_MAP
        self.reads += 1
        await asyncio.sleep(0.01)  # a read in flight while others ask
        return {"jwks.json": json.dumps(tokens.jwks([self.key]))}


async def test_unknown_key_refreshes_are_at_most_one_per_window() -> None:
    clock, kube = Clock(), Published()
    keys = AgentKeys(clock=clock)
    first = await keys.get(kube)  # type: ignore[arg-type]
    assert kube.key.kid in first.kids and kube.reads == 1
    # a burst of refreshes right after a read: none reads again
    await asyncio.gather(*(keys.get(kube, refresh=True) for _ in range(50)))  # type: ignore[arg-type]
    assert kube.reads == 1
    # once the window passed, a burst reads once, together
    clock.now += KEYS_REFRESH_SECONDS
    await asyncio.gather(*(keys.get(kube, refresh=True) for _ in range(50)))  # type: ignore[arg-type]
    assert kube.reads == 2
    clock.now += KEYS_REFRESH_SECONDS / 2
    await keys.get(kube, refresh=True)  # type: ignore[arg-type]
    assert kube.reads == 2
    # the regular re-read goes on without any refresh asked for
    clock.now += KEYS_TTL_SECONDS + 0.1
    await keys.get(kube)  # type: ignore[arg-type]
    assert kube.reads == 3
