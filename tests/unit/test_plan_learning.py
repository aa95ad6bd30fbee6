"""A later plan learns from an expert's step corrections (issue 14, item 4): the pure rule
of `agent_image.planning.learned`."""

from __future__ import annotations

import json
from pathlib import Path

from agent_image.corrections import Correction, CorrectionStore
from agent_image.dispatch import Mode
from agent_image.planning.drafts import Plan
from agent_image.planning.learned import CORRECTED_NOTE, apply_corrections
from humanwork_core.resources import Risk, Step

REQUEST = "Reconcile all Amazon orders for October and update inventory in Shopify"
PROPOSED = {"action": "adjustInventoryLevel", "params": {"inventory_item_id": 1, "delta": 0}}
FIXED = {"action": "adjustInventoryLevel", "params": {"inventory_item_id": 7, "delta": -3}}


def plan() -> Plan:
    read = Step(
        id="step-1",
        description="List the October orders",
        tool="amazon",
        parameters={"action": "listOrders", "params": {}},
        risk=Risk.LOW,
    )
    write = Step(
        id="step-2",
        description="Fix the mismatched stock",
        tool="shopify",
        parameters=PROPOSED,
        risk=Risk.HIGH,
    )
    return Plan(steps=(read, write), mode=Mode.AGENTIC, planner="offline", model="none")


def store(tmp_path: Path, *corrections: Correction) -> CorrectionStore:
    kept = CorrectionStore(tmp_path)
    kept.add(list(corrections))
    return kept


def edit(message: str = REQUEST, before: dict[str, object] = PROPOSED) -> Correction:
    return Correction(
        message=message,
        draft=json.dumps(before, sort_keys=True),
        corrected=json.dumps(FIXED, sort_keys=True),
        kind="step_edit",
    )


def test_an_expert_edit_of_the_same_proposal_for_a_similar_request_is_taken(
    tmp_path: Path,
) -> None:
    learned = apply_corrections(plan(), REQUEST + " please", store(tmp_path, edit()))
    write = learned.steps[1]
    assert dict(write.parameters) == FIXED
    assert write.description.endswith(CORRECTED_NOTE)
    assert write.risk is Risk.HIGH  # still a proposal an expert decides
    assert learned.steps[0] == plan().steps[0]


def test_nothing_changes_for_another_request_another_proposal_or_a_reply_correction(
    tmp_path: Path,
) -> None:
    unrelated = edit(message="Refund order 17 to the customer who wrote yesterday")
    other_proposal = edit(before={"action": "adjustInventoryLevel", "params": {"x": 1}})
    reply = Correction(message=REQUEST, corrected="a reply", kind="reply_edit")
    for correction in (unrelated, other_proposal, reply):
        assert apply_corrections(plan(), REQUEST, store(tmp_path / correction.id, correction)) == (
            plan()
        )


def test_an_expert_rejection_of_the_same_proposal_is_told_in_the_summary(tmp_path: Path) -> None:
    rejected = Correction(
        message=REQUEST,
        draft=json.dumps(PROPOSED, sort_keys=True),
        corrected="Never adjust stock before the count is confirmed",
        kind="step_rejected",
    )
    learned = apply_corrections(plan(), REQUEST, store(tmp_path, rejected))
    assert learned.steps == plan().steps
    assert "Never adjust stock before the count is confirmed" in learned.summary
    assert any("step-2" in w for w in learned.warnings)
