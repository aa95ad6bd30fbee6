"""A change of an agent's pod count alone is held back without reading its owner
(`agent_operator.readiness.held`): only for an owner this process reconciled in full,
only when the ready count is the one reported, and due once, when the settle time is up."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent_operator import readiness
from agent_operator.config import OperatorSettings
from agent_operator.state import State

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
KEY = ("org-a", "agent")


def _state(settle: int = 10) -> State:
    state = State(None, OperatorSettings(replicas_settle_seconds=settle), None)  # type: ignore[arg-type]
    state.applied[KEY] = {("Deployment", "agent-agent"): "digest"}
    state.reported[KEY] = (0, 0)
    return state


def test_a_pod_created_not_ready_is_held_until_the_settle_time() -> None:
    state = _state()
    assert readiness.held(state, KEY, (1, 0), NOW)
    assert state.counts_due[KEY] == NOW + timedelta(seconds=10)
    # a later event of the same counts does not push the time out
    assert readiness.held(state, KEY, (1, 0), NOW + timedelta(seconds=5))
    assert state.counts_due[KEY] == NOW + timedelta(seconds=10)


def test_a_change_of_the_ready_count_or_an_unknown_owner_is_not_held() -> None:
    state = _state()
    assert not readiness.held(state, KEY, (1, 1), NOW)  # Ready: phase and condition move
    assert not readiness.held(state, KEY, (0, 0), NOW)  # nothing moved
    assert not readiness.held(state, ("org-a", "other"), (1, 0), NOW)  # never reconciled
    state.applied[KEY] = {}  # refused before any child: a full reconcile decides
    assert not readiness.held(state, KEY, (1, 0), NOW)
    assert not readiness.held(_state(settle=0), KEY, (1, 0), NOW)  # settling switched off
    assert KEY not in state.counts_due
