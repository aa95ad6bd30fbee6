"""The agent's runtime configuration is one model: what the operator writes into the
ConfigMap is exactly what the agent reads, with the same units and defaults."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_image.config import ConfigHolder, load
from agent_image.planning.config import AgentConfig
from agent_operator import builders
from humanwork_core.resources import AgentInstanceSpec
from humanwork_core.runtime_config import AgentRuntimeConfig
from tests.unit.test_builders import instance


def test_what_the_operator_writes_the_agent_reads_with_the_same_values() -> None:
    agent = instance(
        confidenceThreshold=55, enabledTools=["shopify", "amazon"], maxConcurrentTasks=7
    )
    spec = agent.spec
    written = json.loads(builders.config_map(agent)["data"][builders.CONFIG_FILE])
    config = AgentConfig(written)
    assert config.specialist_name == spec.specialist.name
    assert config.system_prompt == spec.specialist.system_prompt
    assert (config.model, config.temperature) == (spec.model, spec.temperature)
    assert config.confidence_threshold == pytest.approx(0.55)
    assert config.enabled_tools == ("amazon", "shopify")
    assert config.max_concurrent_tasks == 7
    assert (
        builders.canonical_config(spec)
        == AgentRuntimeConfig.model_validate(written).canonical_json()
    )


def test_the_defaults_agree() -> None:
    """The issue's drift: 70 of 100 in the model, 0.7 in the agent, now one default."""
    defaults = AgentInstanceSpec.model_fields["confidence_threshold"].default
    assert AgentConfig({}).confidence_threshold == pytest.approx(defaults / 100)
    assert AgentConfig({}).max_concurrent_tasks == (
        AgentInstanceSpec.model_fields["max_concurrent_tasks"].default
    )
    # the seeds' snake_case spelling and fraction still read the same
    assert AgentConfig({"confidence_threshold": 0.7}).confidence_threshold == pytest.approx(0.7)


def test_a_file_that_is_not_a_configuration_keeps_the_running_one(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model": "m", "confidenceThreshold": 55}))
    holder = ConfigHolder(path)
    before = holder.current.config_hash
    path.write_text(json.dumps({"model": "m", "confidenceThreshold": "very"}))
    with pytest.raises(ValueError, match="not an agent configuration"):
        load(path)
    assert holder.reload() is False and holder.current.config_hash == before
