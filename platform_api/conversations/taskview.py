"""The client's view of a task started from its conversation: the plan in plain
language, each step's state, decision, execution and result, and nothing a client has no
business reading (no parameters but their redacted summary, no decider's ids, no hashes).

Pure functions over the resource models (the current time is an argument). The step's
`confirmation` is where the initiating client's confirmation of a high-stakes step stands
(null for a step that needs none), with the hash `POST .../confirm` sends back. The one
read model of a task for clients: the conversation's task list and the confirm and decline
endpoints answer it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from pydantic import BaseModel, Field, JsonValue

from humanwork_core import catalog, taskflow
from humanwork_core.resources import (
    AgenticTask,
    ConfirmationState,
    ExecutionState,
    Step,
    StepState,
    StepStatus,
    Verdict,
)
from humanwork_core.risk import Risk
from platform_api.redaction import redact
from platform_api.step_results import compact, result_text
from platform_api.tasks.seedview import SeedTaskStatus, seed_status

SUMMARY_CHARS = 500
VALUE_CHARS = 80

_EXECUTION = {
    ExecutionState.RUNNING: "executing",
    ExecutionState.SUCCEEDED: "executed",
    ExecutionState.FAILED: "failed",
    ExecutionState.OUTCOME_UNKNOWN: "outcome_unknown",
}


class Confirmation(BaseModel):
    """Where the initiating client's confirmation of a step stands."""

    required: bool
    state: ConfirmationState = Field(
        description="`waiting` (also after an expert's edit voided an earlier confirmation), "
        "`confirmed` (this very version of the step) or `declined`"
    )
    by: str | None = None
    at: datetime | None = None
    reason: str | None = None
    step_hash: str = Field(
        description="what `POST .../confirm` sends back: the hash of the step as shown "
        "(its parameters included), so a confirmation never lands on another version"
    )


class ClientStep(BaseModel):
    """One step of the plan as the client sees it."""

    id: str
    order: int = Field(ge=1, description="the step's place in the plan, from 1")
    description: str
    tool: str | None
    risk: Risk
    state: StepState
    summary: str = Field(
        description="what the step does, where, and with what (parameters redacted)"
    )
    decision: str = Field(
        description="pending, approved, rejected or expired (the expert's decision)"
    )
    feedback: str | None = Field(default=None, description="a rejection's feedback")
    execution: str = Field(
        description="not_started, executing, executed, failed or outcome_unknown"
    )
    result: str | None = Field(default=None, description="a short summary of the outcome")
    confirmation: Confirmation | None = None


class ClientTask(BaseModel):
    """A task started from the conversation, as its client follows it."""

    name: str
    uid: str
    phase: str
    status: SeedTaskStatus = Field(description="seed 000's snake_case status")
    description: str
    created_at: datetime | None
    steps: list[ClientStep]


class ClientTasks(BaseModel):
    """The tasks of a conversation, newest first."""

    items: list[ClientTask]


def _value(value: JsonValue) -> str:
    text = value if isinstance(value, str) else compact(value)
    text = redact(text)[0]
    return text if len(text) <= VALUE_CHARS else text[: VALUE_CHARS - 1] + "…"


def summary(step: Step, parameters: Mapping[str, JsonValue]) -> str:
    """The step in plain language: whether it reads or changes something, where (the
    tool), what (the action) and with what (each parameter, redacted like the queue)."""
    action_name = parameters.get("action")
    action = catalog.find(step.tool, action_name)
    params = parameters.get("params")
    values: Mapping[str, JsonValue] = (
        params
        if isinstance(params, dict)
        else {k: v for k, v in parameters.items() if k != "action"}
    )
    if step.tool is None:
        verb = "Asks the expert for input"
    elif action is not None and action.side_effect:
        verb = f"Changes data in {step.tool}"
    elif action is not None:
        verb = f"Reads from {step.tool}"
    else:
        verb = f"Uses {step.tool}"
    what = f" ({action_name})" if isinstance(action_name, str) else ""
    details = "; ".join(f"{key}: {_value(value)}" for key, value in values.items())
    text = f"{verb}{what}" + (f": {details}" if details else "")
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"


def _decision(state: StepState, verdict: Verdict | None) -> str:
    if state is StepState.EXPIRED:
        return "expired"
    if verdict is None:
        return "pending"
    return "rejected" if verdict is Verdict.REJECT else "approved"


def confirmation(step: Step, entry: StepStatus) -> Confirmation | None:
    """The step's confirmation as shown: a confirmation of another version reads
    `waiting` (an expert's edit voided it); null for a step that needs none."""
    record = entry.confirmation
    if record is None or not record.required:
        return None
    state = record.state
    if state is ConfirmationState.CONFIRMED and not taskflow.is_confirmed(step, entry):
        state = ConfirmationState.WAITING
    current = state is not ConfirmationState.WAITING
    return Confirmation(
        required=True,
        state=state,
        by=record.by if current else None,
        at=record.at if current else None,
        reason=record.reason if state is ConfirmationState.DECLINED else None,
        step_hash=taskflow.confirmation_hash(step, entry),
    )


def client_step(task: AgenticTask, order: int, step: Step, now: datetime) -> ClientStep:
    entry = task.current_status().step(step.id)
    state = taskflow.step_state(task, step.id, now)
    decision = entry.decision
    run = entry.execution
    feedback = None
    if decision is not None and decision.verdict is Verdict.REJECT and decision.feedback:
        feedback = decision.feedback
    return ClientStep(
        id=step.id,
        order=order,
        description=step.description,
        tool=step.tool,
        risk=step.risk,
        state=state,
        summary=summary(step, taskflow.confirmation_parameters(step, entry)),
        decision=_decision(state, decision.verdict if decision is not None else None),
        feedback=feedback,
        execution="not_started" if run is None else _EXECUTION[run.state],
        result=None if run is None else result_text(run.result, run.error),
        confirmation=confirmation(step, entry),
    )


def client_task(task: AgenticTask, now: datetime) -> ClientTask:
    """The client's view of `task` at `now` (the phase derived from the status, which
    keeps a recorded terminal phase: fresh right after the client's own decline)."""
    phase = taskflow.derive_phase(task, now)
    return ClientTask(
        name=task.metadata.name,
        uid=task.metadata.uid or "",
        phase=phase.value,
        status=seed_status(task, phase, now),
        description=task.spec.description,
        created_at=task.metadata.creation_timestamp,
        steps=[
            client_step(task, order, step, now)
            for order, step in enumerate(task.spec.steps, start=1)
        ],
    )
