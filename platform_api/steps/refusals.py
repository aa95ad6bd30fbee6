"""The one mapping of a `taskflow` refusal to the platform's error family, by how the move
answers it (`Answer`)."""

from __future__ import annotations

import enum

from humanwork_core import taskflow
from platform_api.errors import Conflict, PlatformError, RunStateConflict, from_core


class Answer(enum.Enum):
    """How a move answers the contract's refusal."""

    BY_KIND = "by_kind"
    """The error class listing the refusal's class (`errors.from_core`): a decision's and a
    client's confirmation's answer (`run_state_conflict`, `human_task_expired`, ...)."""
    CONFLICT = "conflict"
    """409 `conflict`, the refusal's code in `details.reason` (resolve, retry, reopen)."""
    RUN_STATE = "run_state"
    """409 `run_state_conflict` with the refusal's message (cancel)."""


def refused(
    exc: taskflow.TaskFlowError, answer: Answer, step_id: str | None = None
) -> PlatformError:
    """The platform's error for the contract's refusal `exc` of a move on `step_id`."""
    if answer is Answer.BY_KIND:
        return from_core(exc)
    if answer is Answer.CONFLICT:
        return Conflict(exc.message, reason=exc.code, step_id=step_id or "")
    return RunStateConflict(exc.message)
