"""`humanwork_core.plandiff`: what a revised plan changed against the rejected one."""

from __future__ import annotations

from typing import Any

from humanwork_core.plandiff import plan_diff
from humanwork_core.resources import Step


def step(step_id: str, **fields: Any) -> Step:
    base: dict[str, Any] = {
        "id": step_id,
        "description": f"step {step_id}",
        "tool": "amazon_query",
        "risk": "low",
        "parameters": {"month": "2026-10"},
    }
    return Step.model_validate({**base, **fields})


def test_added_removed_and_changed_parameters() -> None:
    before = [step("read"), step("write", tool="shopify_query", risk="high"), step("mail")]
    after = [
        step("read", parameters={"month": "2026-09"}),
        step(
            "write", tool="shopify_query", risk="critical", parameters={"month": "2026-10", "n": 3}
        ),
        step("notify"),
    ]
    diff = plan_diff(before, after)
    assert diff.added == ("notify",) and diff.removed == ("mail",)
    read, write = diff.changed
    assert read.step_id == "read" and read.parameters == {"month": ("2026-10", "2026-09")}
    assert read.fields == {}
    assert write.fields == {"risk": ("high", "critical")}
    assert write.parameters == {"n": (None, 3)}
    assert not diff.empty


def test_the_same_plan_has_no_diff() -> None:
    plan = [step("read"), step("write")]
    assert plan_diff(plan, list(plan)).empty
