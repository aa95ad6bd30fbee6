"""The autoscaler's rule (issue 15, item 3): replicas follow the open tasks within the
bounds, up at once, down only after the cooldown; and the model's bounds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from agent_operator.autoscale import OpenTasks, decide, task_is_open, wanted_replicas
from humanwork_core.resources import AgentInstanceSpec, Autoscaling

NOW = datetime(2026, 12, 1, 4, 0, tzinfo=UTC)
COOLDOWN = 60


def spec(replicas: int = 1, **autoscaling: Any) -> AgentInstanceSpec:
    return AgentInstanceSpec.model_validate(
        {
            "orgId": "6f1c1f0e-8a4b-4c55-9d1e-0f6d5c1b2a3e",
            "specialist": {"name": "Bob", "systemPrompt": "You reconcile orders."},
            "model": "openai/gpt-4o",
            "replicas": replicas,
            "maxConcurrentTasks": 2,
            "llm": {
                "baseURL": "https://llm.example/v1",
                "apiKeySecretRef": {"name": "llm", "key": "api-key"},
            },
            **({"autoscaling": autoscaling} if autoscaling else {}),
        }
    )


@pytest.mark.parametrize(
    ("open_tasks", "expected"),
    [(0, 1), (1, 1), (3, 1), (4, 2), (9, 3), (12, 4), (100, 4)],
)
def test_wanted_replicas_is_the_open_work_within_the_bounds(open_tasks: int, expected: int) -> None:
    auto = Autoscaling(min_replicas=1, max_replicas=4)
    assert wanted_replicas(open_tasks, auto, per=3) == expected


def test_without_autoscaling_nothing_is_decided() -> None:
    assert decide(spec(), open_tasks=50, low_since=None, now=NOW, cooldown_seconds=0) is None


def test_scales_up_at_once_and_says_why() -> None:
    decision = decide(spec(1, maxReplicas=5), 7, None, NOW, COOLDOWN)
    assert decision is not None
    # openTasksPerReplica unset: maxConcurrentTasks (2) per pod
    assert (decision.replicas, decision.low_since) == (4, None)
    assert decision.message == "scaled from 1 to 4: 7 open tasks, 2 per replica, bounds 1..5"


def test_never_above_max_nor_below_min() -> None:
    up = decide(spec(1, maxReplicas=3, openTasksPerReplica=1), 40, None, NOW, COOLDOWN)
    assert up is not None and up.replicas == 3
    floor = decide(spec(1, minReplicas=2, maxReplicas=3), 0, None, NOW, COOLDOWN)
    assert floor is not None and floor.replicas == 2  # below min: up at once
    lowered = decide(spec(5, maxReplicas=3), 0, None, NOW, COOLDOWN)
    assert lowered is not None and lowered.replicas == 1  # above a lowered max: at once


def test_scales_down_only_after_the_cooldown() -> None:
    three = spec(3, maxReplicas=5, openTasksPerReplica=1)
    first = decide(three, 1, None, NOW, COOLDOWN)
    assert first is not None and (first.replicas, first.low_since) == (3, NOW)
    early = decide(three, 1, NOW, NOW + timedelta(seconds=COOLDOWN - 1), COOLDOWN)
    assert early is not None and (early.replicas, early.low_since) == (3, NOW)
    due = decide(three, 1, NOW, NOW + timedelta(seconds=COOLDOWN), COOLDOWN)
    assert due is not None and (due.replicas, due.low_since) == (1, None)
    assert due.message.startswith("scaled from 3 to 1: 1 open task, 1 per replica, bounds 1..5")


def test_work_coming_back_during_the_cooldown_cancels_the_scale_down() -> None:
    three = spec(3, maxReplicas=5, openTasksPerReplica=1)
    back = decide(three, 3, NOW, NOW + timedelta(seconds=COOLDOWN * 2), COOLDOWN)
    assert back is not None and (back.replicas, back.low_since, back.message) == (3, None, "")


@pytest.mark.parametrize(
    "bad",
    [
        {"minReplicas": 4, "maxReplicas": 3},
        {"maxReplicas": 21},
        {"maxReplicas": 0},
        {"minReplicas": -1, "maxReplicas": 2},
        {"maxReplicas": 2, "openTasksPerReplica": 0},
        {"minReplicas": 1},
    ],
)
def test_bad_bounds_are_refused(bad: dict[str, int]) -> None:
    with pytest.raises(ValidationError):
        spec(1, **bad)


def test_open_tasks_are_counted_per_agent_and_end_with_a_terminal_phase() -> None:
    tasks = OpenTasks()
    assert task_is_open({}) and task_is_open({"phase": "PendingApproval"})
    assert not task_is_open({"phase": "Completed"}) and not task_is_open({"phase": "Cancelled"})
    assert tasks.update(("ns", "t1"), "shop", True) == ("ns", "shop")
    assert tasks.update(("ns", "t1"), "shop", True) is None  # no change, no rescale
    tasks.update(("ns", "t2"), "shop", True)
    tasks.update(("ns", "t3"), "books", True)
    tasks.update(("other", "t1"), "shop", True)
    assert tasks.count("ns", "shop") == 2 and tasks.count("ns", "books") == 1
    assert tasks.update(("ns", "t1"), "shop", False) == ("ns", "shop")
    assert tasks.forget(("ns", "t2")) == ("ns", "shop")
    assert tasks.forget(("ns", "t2")) is None
    assert tasks.count("ns", "shop") == 0 and tasks.count("other", "shop") == 1
    # what the operator's gauge humanwork_operator_open_tasks reports: agents with open tasks
    assert sorted(tasks.counts()) == [("ns", "books", 1), ("other", "shop", 1)]
