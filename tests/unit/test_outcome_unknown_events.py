"""The operator announces a step whose outcome became unknown with a Warning Event, once,
so that `kubectl describe` and event watchers show that an expert must resolve it."""

from __future__ import annotations

from agent_operator.tasks import transition_events
from humanwork_core.resources import AgenticTaskStatus, StepState, StepStatus


def status(state: StepState | None) -> AgenticTaskStatus:
    return AgenticTaskStatus(steps=(StepStatus(id="fix", state=state),))


def test_a_step_turning_outcome_unknown_is_announced_once() -> None:
    events = transition_events(status(StepState.EXECUTING), status(StepState.OUTCOME_UNKNOWN))
    assert [(e.reason, e.warning) for e in events] == [("OutcomeUnknown", True)]
    assert "resolve" in events[0].message
    again = transition_events(status(StepState.OUTCOME_UNKNOWN), status(StepState.OUTCOME_UNKNOWN))
    assert again == []
