"""Experts' step corrections applied to a new plan (seed 002 UC-21).

When an expert edited a step's parameters, or rejected a step with feedback, the platform
keeps that as a correction of the org (`kind` `step_edit` or `step_rejected`, the request
it answered as `message`, the parameters the agent had proposed as `draft`, the expert's
parameters or feedback as `corrected`) and sends it to the agent. A later plan for a
similar request (word overlap, `agent_image.corrections.similarity`) that proposes the
very parameters an expert corrected gets the expert's parameters instead, and one that
proposes what an expert rejected carries the expert's feedback in its summary and
warnings. The step stays a proposal: its risk is the catalog's, and an expert still
decides it; only the agent's guess improves.

Pure functions over the correction store, no I/O.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from agent_image.corrections import Correction, CorrectionStore
from agent_image.planning.config import MAX_DESCRIPTION
from agent_image.planning.drafts import Plan
from humanwork_core.resources import Step

MIN_SCORE = 0.5
"""How alike two requests must be (Jaccard over content words) for a correction to apply."""

CORRECTED_NOTE = " (parameters as an expert corrected them for a similar request)"


def _params(text: str | None) -> dict[str, Any] | None:
    try:
        found = json.loads(text or "")
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def _edit_for(step: Step, edits: list[Correction]) -> dict[str, Any] | None:
    """The expert's parameters for a step proposing what an edit corrected (same action)."""
    proposed: Mapping[str, Any] = step.parameters
    for correction in edits:
        before, after = _params(correction.draft), _params(correction.corrected)
        if before is None or after is None or before != dict(proposed):
            continue
        if after.get("action") == proposed.get("action"):
            return after
    return None


def apply_corrections(plan: Plan, request: str, store: CorrectionStore) -> Plan:
    """`plan` with the step corrections of requests like `request` applied."""
    edits = [
        m.correction
        for m in store.closest(
            request, limit=20, min_score=MIN_SCORE, kinds=frozenset({"step_edit"})
        )
    ]
    rejected = [
        m.correction
        for m in store.closest(
            request, limit=20, min_score=MIN_SCORE, kinds=frozenset({"step_rejected"})
        )
    ]
    steps, notes = [], []
    for step in plan.steps:
        corrected = _edit_for(step, edits)
        if corrected is not None:
            step = step.model_copy(
                update={
                    "parameters": corrected,
                    "description": (step.description + CORRECTED_NOTE)[:MAX_DESCRIPTION],
                }
            )
        for correction in rejected:
            if _params(correction.draft) == dict(step.parameters):
                notes.append(
                    f"An expert rejected {step.id} ({step.parameters.get('action')}) for a "
                    f"similar request: {correction.corrected}"
                )
                break
        steps.append(step)
    if not notes and tuple(steps) == plan.steps:
        return plan
    summary = " ".join([plan.summary, *notes]).strip()
    return dataclasses.replace(
        plan, steps=tuple(steps), summary=summary, warnings=(*plan.warnings, *notes)
    )
