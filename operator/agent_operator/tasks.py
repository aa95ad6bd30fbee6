"""Reconcile one AgenticTask: the operator's share of the task's status.

The rules are `humanwork_core.taskflow.tick` (deadlines, escalation, expiry, derived phase,
current step, highest pending risk, next deadline); this module adds what needs the API:
whether `spec.agentRef` names an AgentInstance of the namespace (condition
`AgentAvailable`), whether the task waits for its initiating client's confirmation of a
step (condition `WaitingForClient`; the phase stays PendingApproval and the step's state
is AwaitingClient, under the step's deadline and escalations; the Events
`WaitingForClient`, `ClientConfirmed` and `ClientDeclined` on its transitions only), the
server-side apply of the operator's fields only (field manager `humanwork-operator`, so
the platform's decisions and the agent's executions are never touched), the Events of a
transition, and the removal of finished tasks the platform has archived, once their TTL has passed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from agent_operator.config import OperatorSettings
from agent_operator.kube import Kube
from agent_operator.reconcile import GROUP_VERSION, Event
from humanwork_core import keys, taskflow
from humanwork_core.resources import (
    AgenticTask,
    AgenticTaskStatus,
    Condition,
    ConditionStatus,
    ConfirmationState,
    StepState,
    StepStatus,
    TaskPhase,
)
from humanwork_core.resources.common import set_condition

ARCHIVED_ANNOTATION = keys.ARCHIVED
"""Set by the platform API once it has archived a finished task into its database."""
CANCEL_ANNOTATION = keys.CANCEL_REQUESTED
"""Set by the platform API when a user with `run.control` cancels a task; the operator
then moves the task to Cancelled (only the operator writes the phase), and the agent,
seeing a terminal task, runs none of its steps."""


@dataclass
class TaskOutcome:
    """What one task reconcile did, and when the task next needs attention."""

    status: dict[str, Any]
    events: list[Event] = field(default_factory=list)
    wake_at: datetime | None = None
    deleted: bool = False


def agent_condition(task: AgenticTask, agent: dict[str, Any] | None, now: datetime) -> Condition:
    """Pure: whether the task's agent exists in its namespace."""
    name = task.spec.agent_ref.name
    found = agent is not None and not agent["metadata"].get("deletionTimestamp")
    return Condition(
        type="AgentAvailable",
        status=ConditionStatus.TRUE if found else ConditionStatus.FALSE,
        reason="AgentFound" if found else "AgentNotFound",
        message=f"AgentInstance {name} "
        + ("exists in this namespace" if found else "does not exist in this namespace"),
        last_transition_time=now,
        observed_generation=task.metadata.generation,
    )


def client_condition(task: AgenticTask, status: AgenticTaskStatus, now: datetime) -> Condition:
    """Pure: whether the task waits for its initiating client's confirmation of the next
    step (approved or not yet), per the status after this pass."""
    current = task.model_copy(update={"status": status})
    waiting = None
    if status.phase is None or not status.phase.terminal:
        ahead = taskflow.current_step(current)
        step = current.step(ahead) if ahead is not None else None
        if step is not None and taskflow.awaits_client(step, status.step(step.id)):
            waiting = step.id
    return Condition(
        type=WAITING_FOR_CLIENT,
        status=ConditionStatus.TRUE if waiting else ConditionStatus.FALSE,
        reason="ConfirmationPending" if waiting else "NothingToConfirm",
        message=f"step {waiting} waits for the client's confirmation"
        if waiting
        else "no step waits for the client",
        last_transition_time=now,
        observed_generation=task.metadata.generation,
    )


WAITING_FOR_CLIENT = "WaitingForClient"


def _waiting_on(status: AgenticTaskStatus) -> str | None:
    """The step the status says waits for the client (its `WaitingForClient` condition
    is true; the step is its current one, which the same pass wrote), or None."""
    for condition in status.conditions:
        if condition.type == WAITING_FOR_CLIENT and condition.status is ConditionStatus.TRUE:
            return status.current_step
    return None


def _named(task: AgenticTask, step_id: str) -> str:
    step = task.step(step_id)
    return f"step {step_id}" + (f" ({step.description})" if step is not None else "")


def client_events(task: AgenticTask, old: AgenticTaskStatus, new: AgenticTaskStatus) -> list[Event]:
    """Pure: the Events of the task's wait for its initiating client, on the transition
    of the `WaitingForClient` condition only (a pass that keeps the wait posts nothing):
    `WaitingForClient` when a step starts waiting, `ClientConfirmed` or `ClientDeclined`
    when it stops because the client answered (the decline's reason, the client's own
    words, stays in the task's status)."""
    before, after = _waiting_on(old), _waiting_on(new)
    if before == after:
        return []
    events: list[Event] = []
    if before is not None:
        record = new.step(before).confirmation
        state = record.state if record is not None else None
        if state is ConfirmationState.CONFIRMED:
            events.append(
                Event("ClientConfirmed", f"{_named(task, before)} confirmed by the client")
            )
        elif state is ConfirmationState.DECLINED:
            events.append(Event("ClientDeclined", f"{_named(task, before)} declined by the client"))
    if after is not None:
        events.append(
            Event(WAITING_FOR_CLIENT, f"{_named(task, after)} waits for the client's confirmation")
        )
    return events


def transition_events(old: AgenticTaskStatus, new: AgenticTaskStatus) -> list[Event]:
    """Pure: the Events worth posting for the change from `old` to `new`."""
    events: list[Event] = []
    old_steps = {s.id: s for s in old.steps}
    for entry in new.steps:
        before = old_steps.get(entry.id)
        if entry.escalations > (before.escalations if before else 0):
            events.append(
                Event(
                    "Escalated",
                    f"step {entry.id} missed its decision deadline; escalation "
                    f"{entry.escalations}, new deadline {entry.deadline}",
                    warning=True,
                )
            )
        unknown = StepState.OUTCOME_UNKNOWN
        if entry.state is unknown and (before is None or before.state is not unknown):
            events.append(
                Event(
                    "OutcomeUnknown",
                    f"step {entry.id}: whether its tool call took effect is unknown; an "
                    "expert must resolve it (POST /human-tasks/{ns}/{name}/{step}/resolve)",
                    warning=True,
                )
            )
        events.extend(_expiry_events(before, entry, new))
    if new.phase != old.phase and new.phase is not None:
        warning = new.phase.value in ("Expired", "Failed", "Rejected")
        events.append(
            Event(
                f"Task{new.phase.value}",
                f"phase {old.phase.value if old.phase else 'none'} -> {new.phase.value}"
                + (f", current step {new.current_step}" if new.current_step else ""),
                warning=warning,
            )
        )
    return events


def _expiry_events(
    before: StepStatus | None, entry: StepStatus, new: AgenticTaskStatus
) -> list[Event]:
    """Pure: a decision that expired and now awaits a reopening, or that was reopened."""
    expired = StepState.EXPIRED
    was_expired = before is not None and before.state is expired
    if entry.state is expired and not was_expired and new.phase is not TaskPhase.EXPIRED:
        return [
            Event(
                "DecisionExpired",
                f"step {entry.id}: its decision expired; the task waits until an expert "
                "reopens it (POST /human-tasks/{ns}/{name}/{step}/reopen)",
                warning=True,
            )
        ]
    if was_expired and entry.state is not expired and entry.reopened is not None:
        return [
            Event(
                "DecisionReopened",
                f"step {entry.id} reopened by {entry.reopened.by}; new deadline {entry.deadline}",
            )
        ]
    return []


def status_body(task: AgenticTask, status: AgenticTaskStatus) -> dict[str, Any]:
    """The server-side apply body of the operator's fields of the task's status."""
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "AgenticTask",
        "metadata": {"name": task.metadata.name, "namespace": task.metadata.namespace},
        "status": taskflow.owned_status(status, taskflow.Writer.OPERATOR),
    }


def ttl_of(task: AgenticTask, settings: OperatorSettings) -> int:
    """How long the finished task stays once archived: at least the retry window while an
    expert may still retry its failed step (`taskflow.awaiting_retry`)."""
    if taskflow.awaiting_retry(task) is not None:
        return max(settings.task_ttl_seconds, settings.retry_window_seconds)
    return settings.task_ttl_seconds


def expired_ttl(task: AgenticTask, ttl_seconds: int, now: datetime) -> bool:
    """Pure: a finished task the platform archived, past its TTL, may be removed."""
    status = task.current_status()
    if status.phase is None or not status.phase.terminal or taskflow.reopened(task):
        return False  # a failed task an expert retried is about to go on
    if ARCHIVED_ANNOTATION not in task.metadata.annotations:
        return False
    finished = status.completed_at or now
    return now >= finished + timedelta(seconds=ttl_seconds)


async def reconcile_task(
    kube: Kube, settings: OperatorSettings, body: dict[str, Any], now: datetime
) -> TaskOutcome:
    """Bring the operator's fields of one AgenticTask up to date at `now`."""
    task = AgenticTask.from_wire(body)
    ns, name = task.metadata.namespace or "", task.metadata.name
    old = task.current_status()

    if expired_ttl(task, ttl_of(task, settings), now):
        await kube.delete(GROUP_VERSION, "AgenticTask", ns, name)
        return TaskOutcome(status=old.to_wire(), deleted=True)

    agent = await kube.get(GROUP_VERSION, "AgentInstance", ns, task.spec.agent_ref.name)
    new = taskflow.tick(task, now)
    if CANCEL_ANNOTATION in task.metadata.annotations and not (
        new.phase is not None and new.phase.terminal
    ):
        new = taskflow.cancel(task.model_copy(update={"status": new}), now)
    conditions = set_condition(new.conditions, agent_condition(task, agent, now), now=now)
    if any(taskflow.needs_confirmation(entry) for entry in new.steps):
        conditions = set_condition(conditions, client_condition(task, new, now), now=now)
    new = new.model_copy(update={"conditions": conditions})
    mine_before = taskflow.owned_status(old, taskflow.Writer.OPERATOR)
    mine_after = taskflow.owned_status(new, taskflow.Writer.OPERATOR)
    if mine_after != mine_before:
        await kube.apply(status_body(task, new), subresource="status", answer=False)
    wake_at = new.next_deadline
    if (
        new.phase is not None
        and new.phase.terminal
        and ARCHIVED_ANNOTATION in (task.metadata.annotations)
    ):
        wake_at = (new.completed_at or now) + timedelta(seconds=ttl_of(task, settings))
    events = [*transition_events(old, new), *client_events(task, old, new)]
    return TaskOutcome(status=new.to_wire(), events=events, wake_at=wake_at)
