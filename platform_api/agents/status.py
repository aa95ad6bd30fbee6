"""Pure functions of the managed agents: the AgentInstance body the platform sends (built
with the CRD's own model, `humanwork_core.resources.AgentInstance`, so a bad spec is
refused before Kubernetes sees it), the merge of a change into a spec, which spec fields
changed, and an agent's health from its AgentInstance, its last event and its tasks."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from humanwork_core import keys
from humanwork_core.resources import AgentInstance, AgentInstanceSpec, ObjectMeta, TaskPhase
from platform_api.agents.schemas import AgentHealth, AgentRead, ConfigState
from platform_api.errors import AgentSpecInvalid

MANAGED_BY = {"app.kubernetes.io/managed-by": "humanwork-platform-api"}


def spec_errors(exc: ValidationError) -> list[dict[str, Any]]:
    """The model's refusals as (loc, msg, type), without the refused input."""
    return [
        {"loc": ["spec", *err.get("loc", ())], "msg": err.get("msg", ""), "type": err["type"]}
        for err in exc.errors()
    ]


def instance_body(
    org_id: uuid.UUID, namespace: str, name: str, spec: dict[str, Any]
) -> dict[str, Any]:
    """The AgentInstance `name` of the org with `spec`, validated by the CRD's model;
    `spec.orgId` is the org's id whatever `spec` says. `AgentSpecInvalid` otherwise."""
    own = {k: v for k, v in spec.items() if k not in ("orgId", "org_id")}
    try:
        model = AgentInstance(
            metadata=ObjectMeta(name=name, namespace=namespace, labels=MANAGED_BY),
            spec=AgentInstanceSpec.model_validate({**own, "orgId": str(org_id)}),
        )
    except ValidationError as exc:
        raise AgentSpecInvalid("the agent's spec is not valid", errors=spec_errors(exc)) from None
    body = model.to_wire()
    body["metadata"] = {"name": name, "namespace": namespace, "labels": dict(MANAGED_BY)}
    return body


def owned_by(instance: dict[str, Any], org_id: uuid.UUID) -> bool:
    """Whether the AgentInstance is the org's (its `spec.orgId`)."""
    return str((instance.get("spec") or {}).get("orgId")) == str(org_id)


def merge_patch(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """RFC 7386: `patch` merged into `target` (null removes a key), without changing either."""
    out = dict(target)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge_patch(out[key], value)
        else:
            out[key] = value
    return out


def own_patch(patch: dict[str, Any]) -> dict[str, Any]:
    """The caller's change without `orgId`, which is never the caller's to set."""
    return {k: v for k, v in patch.items() if k not in ("orgId", "org_id")}


def changed_fields(before: dict[str, Any], after: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{"before": ..., "after": ...} of each top-level spec field that differs."""
    names = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    return {
        "before": {k: before.get(k) for k in names},
        "after": {k: after.get(k) for k in names},
    }


def agent_of_task(task: dict[str, Any]) -> str:
    ref = (task.get("spec") or {}).get("agentRef")
    return str(ref.get("name", "")) if isinstance(ref, dict) else str(ref or "")


def _open(task: dict[str, Any]) -> bool:
    phase = (task.get("status") or {}).get("phase")
    try:
        return phase is None or not TaskPhase(phase).terminal
    except ValueError:
        return True


def open_tasks_of(tasks: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tasks not in a terminal phase (a task the operator has not ticked yet is open)."""
    return [task for task in tasks if _open(task)]


def open_tasks(tasks: Iterable[dict[str, Any]]) -> Counter[str]:
    """How many tasks not in a terminal phase each agent (by name) has."""
    return Counter(agent_of_task(task) for task in open_tasks_of(tasks))


def health(instance: dict[str, Any], heartbeat: datetime | None, open_count: int) -> AgentHealth:
    """An agent's health from its AgentInstance (status and the applied-config annotation)."""
    status: dict[str, Any] = instance.get("status") or {}
    annotations: dict[str, str] = (instance.get("metadata") or {}).get("annotations") or {}
    desired = status.get("configHash")
    applied = annotations.get(keys.CONFIG_APPLIED)
    expires = (status.get("token") or {}).get("expiresAt")
    return AgentHealth(
        phase=status.get("phase"),
        desiredReplicas=int((instance.get("spec") or {}).get("replicas", 1)),
        replicas=status.get("replicas"),
        readyReplicas=status.get("readyReplicas"),
        conditions=list(status.get("conditions") or []),
        tokenExpiresAt=datetime.fromisoformat(str(expires)) if expires else None,
        config=ConfigState(
            desired=desired, applied=applied, inSync=bool(desired) and desired == applied
        ),
        lastHeartbeat=heartbeat,
        openTasks=open_count,
    )


def agent_read(instance: dict[str, Any], heartbeat: datetime | None, open_count: int) -> AgentRead:
    """The agent as the API shows it."""
    meta: dict[str, Any] = instance.get("metadata") or {}
    created = meta.get("creationTimestamp")
    return AgentRead(
        id=f"{meta.get('namespace')}/{meta.get('name')}",
        name=str(meta.get("name")),
        resourceVersion=str(meta.get("resourceVersion", "")),
        createdAt=datetime.fromisoformat(str(created)) if created else None,
        spec=dict(instance.get("spec") or {}),
        health=health(instance, heartbeat, open_count),
    )
