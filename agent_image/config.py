"""The agent's hot-reloadable configuration: `config.json` from the ConfigMap the operator
writes (canonical JSON), its hash (SHA-256 of the file's bytes, equal to the
AgentInstance's status.configHash), and a watcher that reloads it when the kubelet
updates the mounted file: no pod restart for a new prompt, model or tool list."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from humanwork_core.runtime_config import AgentRuntimeConfig

LOG = logging.getLogger("humanwork.agent")


@dataclass(frozen=True)
class LoadedConfig:
    """One version of the configuration, and the hash that names it."""

    data: dict[str, Any]
    config_hash: str

    @property
    def model(self) -> str:
        return str(self.data.get("model", ""))


def load(path: Path) -> LoadedConfig:
    """Read and parse `config.json`; ValueError when it is not a JSON object."""
    raw = path.read_bytes()
    data = json.loads(raw)
    if not isinstance(data, dict):
        raise ValueError(f"{path} holds no JSON object")
    try:
        AgentRuntimeConfig.model_validate(data)
    except ValidationError as exc:  # a ValueError: the holder keeps what was running
        raise ValueError(f"{path} is not an agent configuration: {exc}") from None
    return LoadedConfig(data=data, config_hash=hashlib.sha256(raw).hexdigest())


class ConfigHolder:
    """The current configuration; `watch` swaps in a new one when the file changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.current = load(path)

    def reload(self) -> bool:
        """Load the file again; True when its content changed. A broken file keeps the
        configuration that was running (and is logged), so a bad edit stops nothing."""
        try:
            fresh = load(self.path)
        except (OSError, ValueError) as exc:
            LOG.warning(
                "config %s unreadable, keeping %s: %s",
                self.path,
                self.current.config_hash[:12],
                exc,
            )
            return False
        if fresh.config_hash == self.current.config_hash:
            return False
        self.current = fresh
        LOG.info("configuration %s loaded", fresh.config_hash[:12])
        return True

    async def watch(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            self.reload()
