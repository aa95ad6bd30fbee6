"""The route vocabulary shared by the slices that expose moves of a step: the path
parameters of a task and its step (with `a_namespace`, the namespace's own check for a
dependency that reads the raw path), and the error codes a decision documents."""

from __future__ import annotations

import re
from typing import Annotated

from fastapi import Path

NAMESPACE = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
NAMESPACE_MAX = 63
NAME = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"

Namespace = Annotated[
    str, Path(max_length=NAMESPACE_MAX, pattern=NAMESPACE, description="the org's namespace")
]

_NAMESPACE = re.compile(NAMESPACE)


def a_namespace(value: str) -> bool:
    """Whether `value` passes `Namespace`'s own check (its length and pattern): for a
    dependency, which FastAPI runs before it checks the path."""
    return len(value) <= NAMESPACE_MAX and _NAMESPACE.fullmatch(value) is not None


Name = Annotated[str, Path(max_length=253, pattern=NAME, description="the task's name")]

UNAVAILABLE = {503: ("kubernetes_unavailable", "no Kubernetes API is configured")}
DECIDE_CODES = {
    403: ("self_approval_forbidden", "the requester of a task cannot approve its steps"),
    409: ("run_state_conflict", "the step already has its decision"),
    410: ("human_task_expired", "the decision deadline passed"),
    422: ("idempotency_conflict", "this idempotency key was used for a different decision"),
    **UNAVAILABLE,
}
DECIDE_DESCRIPTION = (
    " Only the first undecided step can be decided, once every earlier step executed: "
    "409 `run_state_conflict` otherwise, and for a step another expert decided first "
    "(of experts deciding at once, exactly one decision is recorded). 410 "
    "`human_task_expired` after the final deadline. 409 `tool_definition_changed` for "
    "an approval of a step of an org's MCP tool that does not pin the definition the "
    "platform discovered (`/orgs/{org_id}/mcp-servers`). The decision is written into the "
    "task's status under the platform's identity and audited in the org's chain."
)
