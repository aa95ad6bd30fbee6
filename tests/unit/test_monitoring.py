"""The Prometheus rules and the Grafana dashboard of manifests/monitoring.

- `promtool check rules` finds the rule file clean, and `promtool test rules` runs the unit
  tests of manifests/monitoring/tests, in which every alert both fires and stays silent;
  a test whose expectation is wrong makes promtool fail (the tests are really checked);
- every metric the rules and the dashboard's queries name is one the platform, the
  operator or an agent exports: the names are collected from the three components'
  registries, not from a hand list (the rules may also name kube-state-metrics' CronJob
  series, for the audit checkpoints' CronJob); the dashboard's queries are valid PromQL
  (promtool checks each as a rule).

promtool comes from humanwork_dev/scripts/build-promtool.sh (`make promtool-binaries`, which
`make test` runs first); these tests fail when it is missing.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.registry import CollectorRegistry

REPO = Path(__file__).resolve().parents[2]
MONITORING = REPO / "manifests" / "monitoring"
RULES = MONITORING / "rules.yaml"
TESTS = sorted((MONITORING / "tests").glob("*.yaml"))
DASHBOARD = MONITORING / "dashboard.json"
KUBE_STATE = ("kube_cronjob_status_last_successful_time", "kube_cronjob_created")
"""kube-state-metrics' series the rules may name (the audit checkpoints' CronJob)."""


@pytest.fixture(scope="module")
def promtool() -> Path:
    script = REPO / "humanwork_dev" / "scripts" / "build-promtool.sh"
    where = subprocess.run(["bash", str(script), "--print-bin"], check=True, capture_output=True)
    binary = Path(where.stdout.decode().strip()) / "promtool"
    if not binary.is_file():
        pytest.fail(f"promtool is missing ({binary}): run `make promtool-binaries`")
    return binary


def run(promtool: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(promtool), *args], capture_output=True, text=True, check=False, timeout=120
    )


def alerts() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


# --- the exported metrics, from the components' own registries --------------------------------


def _names(registry: CollectorRegistry) -> Iterator[str]:
    suffixes = {
        "counter": ("_total", "_created"),
        "histogram": ("_bucket", "_count", "_sum", "_created"),
        "summary": ("_count", "_sum", "_created"),
        "gauge": ("",),
        "info": ("_info",),
    }
    for family in registry.collect():
        yield family.name
        for suffix in suffixes.get(family.type, ("",)):
            yield family.name + suffix


def exported() -> set[str]:
    """Every series name the agent, the platform and the operator export."""
    from prometheus_client import REGISTRY

    from agent_image.metrics import AgentMetrics
    from agent_operator import metrics as operator_metrics
    from platform_api.metrics import PlatformMetrics

    assert operator_metrics.LEADER is not None  # the operator's series are in REGISTRY
    names: set[str] = set()
    for registry in (AgentMetrics().registry, PlatformMetrics().registry, REGISTRY):
        names |= set(_names(registry))
    return names


_KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right",
    "and", "or", "unless", "bool", "offset", "inf", "nan",
}  # fmt: skip


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (strings, label matchers, grouping
    labels, ranges, Grafana's variables and function names left out)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\$\{?\w+\}?", "1", text)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    found = set()
    for match in re.finditer(r"(?<![\w.])([A-Za-z_:][A-Za-z0-9_:]*)\b(\s*\()?", text):
        name, call = match.group(1), match.group(2)
        if call or name.lower() in _KEYWORDS or re.fullmatch(r"\d+[smhdwy]", name):
            continue
        found.add(name)
    return found


def panel_queries() -> list[tuple[str, str]]:
    """(panel title, query) of every target of every panel, and the variables' queries."""
    board = json.loads(DASHBOARD.read_text())
    found = [
        (panel["title"], target["expr"])
        for panel in board["panels"]
        for target in panel.get("targets", [])
    ]
    for variable in board["templating"]["list"]:
        query = variable.get("query")
        if isinstance(query, dict):
            inner = re.fullmatch(r"label_values\((\w+),\s*\w+\)", query["query"])
            assert inner is not None, query
            found.append((f"${variable['name']}", inner.group(1)))
    return found


# --- the rules ----------------------------------------------------------------------------------


def test_promtool_finds_the_rules_clean(promtool: Path) -> None:
    done = run(promtool, "check", "rules", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(alerts())} rules found" in done.stdout + done.stderr


def test_the_rules_unit_tests_pass(promtool: Path) -> None:
    assert TESTS, "no promtool tests"
    done = run(promtool, "test", "rules", *map(str, TESTS))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "FAILED" not in done.stdout + done.stderr


def test_a_wrong_expectation_fails_promtool(promtool: Path, tmp_path: Path) -> None:
    """The unit tests are really evaluated: with every firing expectation made silent,
    promtool fails and names each alert."""
    files = []
    for path in TESTS:
        doc = yaml.safe_load(path.read_text())
        doc["rule_files"] = [str(RULES)]
        for test in doc["tests"]:
            for case in test.get("alert_rule_test", []):
                case["exp_alerts"] = []
        files.append(tmp_path / path.name)
        files[-1].write_text(yaml.safe_dump(doc))
    done = run(promtool, "test", "rules", *map(str, files))
    assert done.returncode != 0, "promtool passed wrong expectations"
    for name in sorted({rule["alert"] for rule in alerts()}):
        assert f"alertname: {name}," in done.stdout + done.stderr, name


def test_every_alert_is_tested_firing_and_silent() -> None:
    fires: set[str] = set()
    silent: set[str] = set()
    for path in TESTS:
        for test in yaml.safe_load(path.read_text())["tests"]:
            for case in test.get("alert_rule_test", []):
                (fires if case["exp_alerts"] else silent).add(case["alertname"])
    names = {rule["alert"] for rule in alerts()}
    required = {
        "HumanworkApprovalStuck",
        "HumanworkDeadlineApproaching",
        "HumanworkAgentNotReady",
        "HumanworkUpstreamFailing",
        "HumanworkOperatorNoLeader",
        "HumanworkAuditCheckpointTooOld",
    }
    assert required <= names
    assert names <= fires, names - fires
    assert names <= silent, names - silent


def test_the_rules_name_only_exported_metrics() -> None:
    names = exported()
    assert "humanwork_agent_tool_calls_total" in names  # collected, not listed by hand
    for rule in alerts():
        used = metric_names(rule["expr"])
        assert used, rule["alert"]
        unknown = used - names - set(KUBE_STATE)
        assert not unknown, f"{rule['alert']} names {unknown}, which nothing exports"


# --- the dashboard --------------------------------------------------------------------------------


def test_every_dashboard_query_names_only_exported_metrics() -> None:
    names = exported()
    queries = panel_queries()
    assert len(queries) >= 20
    for title, query in queries:
        used = metric_names(query)
        assert used, f"{title}: {query} names no metric"
        assert not used - names, f"{title}: {query} names {used - names}, which nothing exports"
    covered = set().union(*(metric_names(q) for _, q in queries))
    for prefix in ("humanwork_platform_", "humanwork_operator_", "humanwork_agent_"):
        assert any(name.startswith(prefix) for name in covered), prefix


def test_the_dashboards_queries_are_valid_promql(promtool: Path, tmp_path: Path) -> None:
    rules = [
        {"record": f"humanwork:panel_{number}", "expr": re.sub(r"\$__rate_interval", "5m", q)}
        for number, (_, q) in enumerate(panel_queries())
    ]
    for rule in rules:
        rule["expr"] = re.sub(r"\$\w+", ".*", rule["expr"])
    path = tmp_path / "panels.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "panels", "rules": rules}]}))
    done = run(promtool, "check", "rules", str(path))
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_name_extraction_sees_through_promql() -> None:
    query = (
        'histogram_quantile(0.95, sum by (le, tool) (rate(a_bucket{tool=~"x|y",ns="$ns"}'
        "[$__rate_interval]))) / on (tool) group_left b_total or absent(c == 1) - time()"
    )
    assert metric_names(query) == {"a_bucket", "b_total", "c"}
    assert metric_names("sum(rate(x[5m])) > 0.2 * 3600") == {"x"}


def test_the_charts_copies_are_the_manifests() -> None:
    """The chart renders files/monitoring (Helm reads no file outside the chart): the
    copies are the files of manifests/monitoring, byte for byte."""
    copies = REPO / "charts" / "humanwork-operator" / "files" / "monitoring"
    for name in ("rules.yaml", "dashboard.json"):
        assert (copies / name).read_bytes() == (MONITORING / name).read_bytes(), name
