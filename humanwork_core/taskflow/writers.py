"""Who writes which part of an AgenticTask's status (the platform API, the agent, the
operator), and :func:`owned_status`, a writer's part as the body of its server-side apply."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from ..resources import (
    AgenticTaskStatus,
)


class Writer(StrEnum):
    """The three components that write an AgenticTask's status, each its own fields."""

    PLATFORM_API = "platform-api"
    AGENT = "agent"
    OPERATOR = "operator"


OPERATOR_STATUS_FIELDS = (
    "phase",
    "currentStep",
    "highestPendingRisk",
    "nextDeadline",
    "conditions",
    "observedGeneration",
    "startedAt",
    "completedAt",
)
"""Top-level status fields (wire names) only the operator writes."""


STEP_FIELDS: Mapping[Writer, tuple[str, ...]] = {
    Writer.PLATFORM_API: ("approvals", "decision", "confirmation", "resolution", "reopened"),
    Writer.AGENT: ("execution",),
    Writer.OPERATOR: ("state", "deadline", "escalations"),
}
"""Fields of each status.steps entry (wire names) and who writes them; `id` is the key."""


def owned_status(status: AgenticTaskStatus, writer: Writer) -> dict[str, Any]:
    """The part of `status` that `writer` owns, as the body of its server-side apply.

    Each writer applies with its own field manager and only these fields, so that the
    three writers never overwrite each other (the admission policies check the same
    partition). Entries of status.steps carry their `id` key and the writer's fields only;
    entries with nothing of the writer's are left out.
    """
    wire = status.to_wire()
    body: dict[str, Any] = {}
    if writer is Writer.OPERATOR:
        body.update({name: wire[name] for name in OPERATOR_STATUS_FIELDS if name in wire})
    steps = []
    for entry in wire.get("steps", []):
        part = {
            name: entry[name] for name in STEP_FIELDS[writer] if entry.get(name) not in (None, [])
        }
        if part:
            steps.append({"id": entry["id"], **part})
    if steps:
        body["steps"] = steps
    return body
