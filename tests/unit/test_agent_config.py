"""The agent's configuration: the hash it reports is the operator's configHash, a new file
is picked up without a restart, and a broken one never replaces a working one."""

from __future__ import annotations

import hashlib
from pathlib import Path

import httpx
import pytest

from agent_image.app import create_app
from agent_image.config import ConfigHolder, load
from agent_image.settings import AgentSettings
from agent_operator.builders import canonical_config, config_hash
from tests.unit.test_builders import instance


def write_config(path: Path, **spec: object) -> str:
    path.write_text(canonical_config(instance(**spec).spec))
    return config_hash(instance(**spec).spec)


def test_the_agent_hash_of_the_file_is_the_operators_config_hash(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    expected = write_config(path)
    loaded = load(path)
    assert loaded.config_hash == expected
    assert loaded.config_hash == hashlib.sha256(path.read_bytes()).hexdigest()
    assert loaded.model == instance().spec.model


def test_a_new_file_is_reloaded_and_a_broken_one_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    first = write_config(path)
    holder = ConfigHolder(path)
    assert not holder.reload()  # unchanged
    second = write_config(path, model="anthropic/claude")
    assert holder.reload() and holder.current.config_hash == second != first
    path.write_text("{not json")
    assert not holder.reload()
    assert holder.current.config_hash == second
    path.write_text("[1, 2]")
    assert not holder.reload() and holder.current.model == "anthropic/claude"


def test_a_missing_or_invalid_file_is_refused_at_start(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        ConfigHolder(tmp_path / "absent.json")
    (tmp_path / "list.json").write_text("[]")
    with pytest.raises(ValueError):
        ConfigHolder(tmp_path / "list.json")


async def test_health_and_status_report_the_loaded_configuration(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    expected = write_config(path)
    settings = AgentSettings(
        agent_id="org-acme/acme",
        agent_name="acme",
        org_id=instance().spec.org_id,
        namespace="org-acme",
        platform_url="http://platform.invalid",
        callback_url="http://platform.invalid/v1/agent-events",
        token_file=tmp_path / "token",
        callback_secret_file=tmp_path / "secret",
        config_file=path,
    )
    app = create_app(settings)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://agent") as http:
        health = (await http.get("/v1/health")).json()
        status = (await http.get("/v1/status")).json()
    assert health == {"status": "ok", "configHash": expected}
    assert status["configHash"] == expected and status["agentId"] == "org-acme/acme"
    assert status["model"] == instance().spec.model
