"""The agents' traces in a cluster: the operator gives the agent the standard OTLP
variables only when `agent_traces_endpoint` is set, and the agent's NetworkPolicy opens
exactly the collector's pods on the endpoint's port; bad settings are refused at start."""

from __future__ import annotations

from typing import Any

import pytest

from agent_operator import builders
from agent_operator.config import OperatorSettings
from tests.unit.test_builders import instance

TRACING = OperatorSettings(
    agent_traces_endpoint="http://otel-collector.monitoring:4318",
    agent_traces_namespaces="kubernetes.io/metadata.name=monitoring",
    agent_traces_pods="app.kubernetes.io/name=otel-collector",
)


def _env(settings: OperatorSettings) -> dict[str, Any]:
    pod = builders.pod_template(instance(), settings)
    return {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}


def _egress(settings: OperatorSettings) -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = builders.network_policy(instance(), settings)["spec"]["egress"]
    return rules


def test_the_agent_gets_the_otlp_variables_only_when_the_operator_names_a_collector() -> None:
    on = _env(TRACING)
    assert on["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://otel-collector.monitoring:4318"
    assert on["OTEL_SERVICE_NAME"] == "humanwork-agent"
    off = _env(OperatorSettings())
    assert not [name for name in off if name.startswith("OTEL_")]


def test_the_agents_egress_reaches_the_collector_pods_on_its_port_and_nothing_more() -> None:
    base = _egress(OperatorSettings())
    traced = _egress(TRACING)
    added = [rule for rule in traced if rule not in base]
    assert added == [
        {
            "to": [
                {
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": "monitoring"}
                    },
                    "podSelector": {"matchLabels": {"app.kubernetes.io/name": "otel-collector"}},
                }
            ],
            "ports": [{"protocol": "TCP", "port": 4318}],
        }
    ]
    assert [rule for rule in base if rule not in traced] == []
    # no port named: the scheme's; no pods named: any pod of the collector's namespaces
    https = OperatorSettings(
        agent_traces_endpoint="https://collector.example.internal/",
        agent_traces_namespaces="team=obs",
    )
    (rule,) = [r for r in _egress(https) if r not in base]
    assert rule == {
        "to": [{"namespaceSelector": {"matchLabels": {"team": "obs"}}}],
        "ports": [{"protocol": "TCP", "port": 443}],
    }


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"agent_traces_endpoint": "http://c:4318"}, "needs AGENT_TRACES_NAMESPACES"),
        (
            {"agent_traces_endpoint": "file:///tmp/x", "agent_traces_namespaces": "a=b"},
            "must be an http(s) URL",
        ),
        (
            {"agent_traces_endpoint": "http://c:99999", "agent_traces_namespaces": "a=b"},
            "must be an http(s) URL",
        ),
        ({"agent_traces_namespaces": "not a selector"}, "AGENT_TRACES_NAMESPACES"),
        ({"agent_traces_pods": "a=b=c!"}, "AGENT_TRACES_PODS"),
    ],
)
def test_a_bad_traces_setting_is_refused_at_start(fields: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        OperatorSettings(**fields)  # type: ignore[arg-type]


def test_the_settings_read_from_the_environment() -> None:
    read = OperatorSettings.from_env(
        {
            "HUMANWORK_OPERATOR_AGENT_TRACES_ENDPOINT": "http://otel:4318",
            "HUMANWORK_OPERATOR_AGENT_TRACES_NAMESPACES": "team=obs",
        }
    )
    assert read.agent_traces_endpoint == "http://otel:4318"
    assert _env(read)["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://otel:4318"
