"""The client's read model of a task (`ClientTask`): the plan in plain language with each
step's state, decision, execution and confirmation, redacted like the review queue. The
confirm and decline endpoints answer it, and the client's task list of a conversation is
built from it (`client_task`)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from humanwork_core import taskflow
from humanwork_core.resources import AgenticTask, ConfirmationState, Step, StepStatus
from platform_api.human_tasks.redact import redact
from platform_api.tasks.seedview import seed_status

SUMMARY_CHARS = 600
"""The longest plain-language summary of a step."""


class ClientConfirmation(BaseModel):
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
    order: int
    description: str
    tool: str | None
    risk: str
    state: str
    summary: str = Field(description="what, where, how much, what it changes (redacted)")
    decision: str
    feedback: str | None
    execution: str | None
    result: str | None
    confirmation: ClientConfirmation | None


class ClientTask(BaseModel):
    """A task as a client sees it (no raw parameters, no experts' notes beyond feedback)."""

    name: str
    uid: str | None
    phase: str
    status: str
    description: str
    created_at: datetime | None
    steps: list[ClientStep]


def _text(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{key} {_text(item)}" for key, item in value.items())
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_text(item) for item in value) + "]"
    return str(value)


def summary(step: Step, entry: StepStatus) -> str:
    """The step in plain language: its description, then what it calls with which values
    (the experts' amendment included), redacted."""
    parameters = taskflow.confirmation_parameters(step, entry)
    action = parameters.get("action")
    params = parameters.get("params")
    if not isinstance(params, Mapping):  # a flat call: every value but the action's name
        params = {key: value for key, value in parameters.items() if key != "action"}
    where = f"{step.tool}.{action}" if step.tool and action else step.tool or ""
    values = _text(params) if params else ""
    text = step.description
    if where:
        text += f" ({where}{': ' + values if values else ''})"
    return redact(text[:SUMMARY_CHARS])[0]


def confirmation(step: Step, entry: StepStatus) -> ClientConfirmation | None:
    """The step's confirmation as shown: a confirmation of another version reads
    `waiting` (an expert's edit voided it)."""
    record = entry.confirmation
    if record is None or not record.required:
        return None
    state = record.state
    if state is ConfirmationState.CONFIRMED and not taskflow.is_confirmed(step, entry):
        state = ConfirmationState.WAITING
    current = state is not ConfirmationState.WAITING
    return ClientConfirmation(
        required=True,
        state=state,
        by=record.by if current else None,
        at=record.at if current else None,
        reason=record.reason if state is ConfirmationState.DECLINED else None,
        step_hash=taskflow.confirmation_hash(step, entry),
    )


def _step(task: AgenticTask, order: int, step: Step, now: datetime) -> ClientStep:
    entry = task.current_status().step(step.id)
    decision = entry.decision
    execution = entry.execution
    result = None
    if execution is not None and execution.result is not None:
        result = redact(_text(execution.result)[:SUMMARY_CHARS])[0]
    return ClientStep(
        id=step.id,
        order=order,
        description=redact(step.description)[0],
        tool=step.tool,
        risk=step.risk.value,
        state=taskflow.step_state(task, step.id, now).value,
        summary=summary(step, entry),
        decision=("approved" if decision.verdict.positive else "rejected")
        if decision is not None
        else "pending",
        feedback=decision.feedback if decision is not None else None,
        execution=execution.state.value.lower() if execution is not None else None,
        result=result,
        confirmation=confirmation(step, entry),
    )


def client_task(task: AgenticTask, now: datetime) -> ClientTask:
    """The client's read model of `task` at `now`."""
    phase = taskflow.derive_phase(task, now)
    return ClientTask(
        name=task.metadata.name,
        uid=task.metadata.uid,
        phase=phase.value,
        status=seed_status(task, phase, now).value,
        description=redact(task.spec.description)[0],
        created_at=task.metadata.creation_timestamp,
        steps=[_step(task, n, s, now) for n, s in enumerate(task.spec.steps, start=1)],
    )
