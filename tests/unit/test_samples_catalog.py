"""One naming of tools and actions everywhere (issue 15, item 6): every step of every
AgenticTask the repository ships as an example (manifests/, docs/, the API's OpenAPI
examples) calls a tool of the action catalog by its canonical name, with `parameters`
`{action, params}` the catalog accepts, at no less than the action's minimum risk; every
AgentInstance example enables catalog tools only."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from humanwork_core import catalog
from humanwork_core.resources import AgenticTask, AgentInstance, Risk
from platform_api.human_tasks.schemas import HumanTaskDetail
from platform_api.tasks.schemas import PLAN_EXAMPLE

REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted(
    [*REPO.glob("manifests/**/*.yaml"), *REPO.glob("docs/**/*.yaml")], key=lambda p: str(p)
)


def _documents() -> Iterator[tuple[str, dict[str, Any]]]:
    for path in SHIPPED:
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict):
                yield str(path.relative_to(REPO)), doc


def _steps() -> list[tuple[str, dict[str, Any]]]:
    found = [
        (f"{where}: {doc['metadata']['name']}/{step['id']}", step)
        for where, doc in _documents()
        if doc.get("kind") == "AgenticTask"
        for step in doc["spec"]["steps"]
    ]
    found += [(f"POST /agentic/tasks example/{s['id']}", s) for s in PLAN_EXAMPLE["steps"]]
    for example in HumanTaskDetail.model_config["json_schema_extra"]["examples"]:  # type: ignore[index]
        found += [(f"human task example/{s['id']}", s) for s in example["plan"]]
    return found


def problems_of(step: dict[str, Any]) -> list[str]:
    """What is wrong with one step's call, by the catalog (empty when nothing)."""
    if step.get("kind", "action") != "action":
        return []
    tool = catalog.TOOLS.get(step.get("tool") or "")
    if tool is None:
        return [f"tool {step.get('tool')!r} is not a catalog tool's canonical name"]
    parameters = step.get("parameters") or {}
    if set(parameters) != {"action", "params"}:
        return [f"parameters must be {{action, params}}, not {sorted(parameters)}"]
    action = tool.actions.get(parameters["action"])
    if action is None:
        return [f"{tool.name} has no action {parameters['action']!r}"]
    validator = jsonschema.Draft202012Validator(
        action.json_schema(), format_checker=jsonschema.FormatChecker()
    )
    found = [f"params: {e.message}" for e in validator.iter_errors(parameters["params"])]
    if Risk(step["risk"]).rank < action.min_risk.rank:
        found.append(f"risk {step['risk']} is below {action.name}'s {action.min_risk.value}")
    return found


STEPS = _steps()


def test_the_shipped_examples_are_found() -> None:
    where = {w.split(":")[0] for w, _ in STEPS}
    assert "manifests/samples/agentictask.yaml" in where, where
    assert len(STEPS) >= 5, STEPS


@pytest.mark.parametrize(("where", "step"), STEPS, ids=[w for w, _ in STEPS])
def test_every_shipped_step_calls_a_catalog_action_with_valid_params(
    where: str, step: dict[str, Any]
) -> None:
    assert problems_of(step) == [], where


def test_the_check_refuses_what_the_old_samples_said() -> None:
    """The samples as they were (flat parameters, the seeds' spelling) fail the check."""
    old = {
        "id": "fetch",
        "kind": "action",
        "tool": "amazon_query",
        "parameters": {"action": "listOrders", "dateRange": "2026-10"},
        "risk": "low",
    }
    assert problems_of(old) == ["tool 'amazon_query' is not a catalog tool's canonical name"]
    assert problems_of({**old, "tool": "amazon"})[0].startswith("parameters must be")
    flat = {**old, "tool": "amazon", "parameters": {"action": "listOrders", "params": {}}}
    assert problems_of(flat) == ["params: 'CreatedAfter' is a required property"]
    late = {**flat, "parameters": {"action": "listOrders", "params": {"CreatedAfter": "oct"}}}
    assert problems_of(late) == ["params: 'oct' is not a 'date-time'"]
    write = {
        **old,
        "tool": "shopify",
        "parameters": {"action": "setInventoryLevel", "params": {"available": 1, "x": 2}},
    }
    assert problems_of(write)[0].startswith("params: Additional properties")
    assert problems_of(write)[-1] == "risk low is below setInventoryLevel's high"


def test_every_shipped_document_is_a_valid_resource_with_catalog_tools() -> None:
    seen = 0
    for where, doc in _documents():
        if doc.get("kind") == "AgentInstance":
            spec = AgentInstance.model_validate(doc).spec
            assert set(spec.enabled_tools) <= set(catalog.TOOLS), where
            seen += 1
        elif doc.get("kind") == "AgenticTask":
            AgenticTask.model_validate(doc)
            seen += 1
    assert seen >= 2
