"""The queue's view of an unknown outcome and an expert's resolution judge a started claim
by the platform's configured lease, the same rule the tool proxy uses: with a lease longer
than the default, a claim of a live call must not read as stale (a resolution then would
race the call); with a shorter one, a dead platform's claim is stale as soon as the proxy
says so."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from platform_api.agent_api.ledger import claim_is_stale
from platform_api.human_tasks.resolve import _open_claim
from platform_api.human_tasks.unknown import _ledger_state
from platform_api.models import ToolCall

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def claim(age_seconds: float, state: str = "started") -> ToolCall:
    return ToolCall(
        org_id=uuid.uuid4(),
        agent_id="org-a/agent",
        idempotency_key="step:uid/fix",
        state=state,
        created_at=NOW - timedelta(seconds=age_seconds),
    )


@pytest.mark.parametrize(
    ("age", "lease", "stale"),
    [(400, 600, False), (601, 600, True), (30, 20, True), (10, 20, False), (301, 300, True)],
)
def test_every_view_judges_a_started_claim_by_the_configured_lease(
    age: float, lease: float, stale: bool
) -> None:
    row = claim(age)
    assert claim_is_stale(row, NOW, lease) is stale
    assert _ledger_state(row, NOW, lease) == ("stale" if stale else "in_flight")
    assert _open_claim(row, NOW, lease) is stale


def test_an_unknown_claim_is_open_whatever_its_age_and_a_finished_one_never() -> None:
    assert _open_claim(claim(1, "unknown"), NOW, 600)
    assert not _open_claim(claim(10_000, "done"), NOW, 600)
    assert _ledger_state(claim(10_000, "done"), NOW, 600) == "done"
    assert not _open_claim(None, NOW, 600) and _ledger_state(None, NOW, 600) == "absent"
