"""Who asked for a task: the requester the platform vouches for, never one an agent names.

An agent creates the AgenticTask for a plan request, but it is untrusted:
admission makes an agent's task say `spec.requestedBy: agent:<its name>`
(manifests/base/policies/agent-task-identity.yaml). The platform records each plan request
it sends an agent under an id (:func:`plan_request_id`), the agent puts that id on the task
it creates (annotation :data:`PLAN_REQUEST_ANNOTATION`), and the platform, when the agent
answers with the task, binds the person who asked to it (annotation
:data:`REQUESTER_ANNOTATION`, which admission lets only the platform API write). Everything
that asks "who requested this task" (self-approval, the queue, the archive) asks
:func:`requester_of`.
"""

from __future__ import annotations

import hashlib
import uuid

from humanwork_core.resources import AgenticTask

from .resources.common import GROUP

REQUESTER_ANNOTATION = f"{GROUP}/requester"
"""The requester the platform vouches for (written only by the platform API)."""
PLAN_REQUEST_ANNOTATION = f"{GROUP}/plan-request"
"""The id of the platform's plan request the agent created the task for."""
AGENT_REQUESTER_PREFIX = "agent:"


def agent_requester(agent_name: str) -> str:
    """The requester of a task an agent created on its own: `agent:<name>`."""
    return AGENT_REQUESTER_PREFIX + agent_name


def requester_of(task: AgenticTask) -> str:
    """The task's requester: the one the platform vouched for, else `spec.requestedBy`
    (which admission pins to `agent:<name>` for a task an agent created)."""
    vouched = task.metadata.annotations.get(REQUESTER_ANNOTATION)
    return vouched or task.spec.requested_by


def plan_request_id(
    org_id: str, agent_name: str, requester: str, idempotency_key: str | None
) -> str:
    """The id of one plan request. With an idempotency key it is derived from the org, the
    agent, the requester and the key (a retry names the same request, so the task the first
    attempt made is still bound); without one it is random."""
    if not idempotency_key:
        return str(uuid.uuid4())
    material = "\n".join((org_id, agent_name, requester, idempotency_key)).encode("utf-8")
    return hashlib.sha256(material).hexdigest()[:32]


def may_bind(task: AgenticTask, agent_name: str, request_id: str) -> bool:
    """Whether the platform may record the plan request `request_id`'s requester on `task`:
    the task is the agent's own, created by it (`agent:<name>`), carries exactly this
    request's id, and has no vouched requester yet (the first binding stands)."""
    annotations = task.metadata.annotations
    return (
        task.spec.agent_ref.name == agent_name
        and task.spec.requested_by == agent_requester(agent_name)
        and annotations.get(PLAN_REQUEST_ANNOTATION) == request_id
        and REQUESTER_ANNOTATION not in annotations
    )
