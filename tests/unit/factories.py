"""Builders of resource models for the unit tests (plain functions, no fixtures magic)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from humanwork_core.resources import (
    AgenticTask,
    AgenticTaskSpec,
    AgenticTaskStatus,
    AgentRef,
    ObjectMeta,
    Risk,
    Step,
    StepKind,
    TaskPolicy,
)

REPO = Path(__file__).resolve().parents[2]
ORG_ID = "3f2b8c1e-7d4a-4e9b-9c51-2a6f0d8e4b17"
T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def action(step_id: str, risk: Risk = Risk.LOW, **fields: Any) -> Step:
    """An action step calling a tool."""
    values: dict[str, Any] = {
        "id": step_id,
        "description": f"do {step_id}",
        "tool": "shopify_query",
        "parameters": {"action": step_id},
        "risk": risk,
    }
    values.update(fields)
    return Step(**values)


def input_step(step_id: str, options: tuple[str, ...] | None = None, **fields: Any) -> Step:
    """An input step (select-type when options are given)."""
    values: dict[str, Any] = {
        "id": step_id,
        "description": f"ask {step_id}",
        "kind": StepKind.INPUT,
        "risk": Risk.LOW,
        "options": options,
    }
    values.update(fields)
    return Step(**values)


def make_task(
    *steps: Step,
    policy: TaskPolicy | None = None,
    status: AgenticTaskStatus | None = None,
) -> AgenticTask:
    """An AgenticTask in namespace org-acme with the given plan."""
    plan = steps or (action("read"), action("write", Risk.HIGH))
    return AgenticTask(
        metadata=ObjectMeta(name="task", namespace="org-acme", generation=1),
        spec=AgenticTaskSpec(
            org_id=ORG_ID,
            agent_ref=AgentRef(name="acme-ecommerce"),
            description="Reconcile orders",
            requested_by="ops@acme.example",
            policy=policy or TaskPolicy(),
            steps=plan,
        ),
        status=status,
    )


def with_status(task: AgenticTask, status: AgenticTaskStatus) -> AgenticTask:
    """The task with its status replaced."""
    return task.model_copy(update={"status": status})


def load_yaml_documents(path: Path) -> list[dict[str, Any]]:
    """Every non-empty YAML document of a file."""
    with path.open(encoding="utf-8") as handle:
        return [doc for doc in yaml.safe_load_all(handle) if doc]
