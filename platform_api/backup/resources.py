"""The resources' copy: AgenticTasks and AgentInstances exported with their status, and
re-applied.

What a restore means for each:

- an **AgentInstance** is desired state: its spec (and labels, annotations) is created
  where it is missing; its status (phase, tokens, conditions) is the operator's, which
  provisions it again and issues new tokens (the backup holds no token). An existing one
  is left alone.
- an **AgenticTask**'s status is the approval record. A task that still exists is left
  alone: what the API server holds is newer than any backup. A missing one is created
  from the backup (a new uid: its original one is kept in the annotation
  `humanwork.io/restored-from-uid`) and its status written back, reconciled
  (`reconcile_status`): every approved tool step that had not finished at backup time
  (approved and not started, or running) comes back `OutcomeUnknown`, because it may have
  reached its upstream after the backup. The agent never runs such a step on its own; an
  expert checks the upstream and resolves it (`Mark as executed`, or `Mark as not executed
  and retry`: once). Decisions, approvals and finished executions are kept as they were.
"""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from humanwork_core.kube_client import Kube, cluster_path, path_for
from humanwork_core.kube_errors import KubeError
from humanwork_core.resources.common import GROUP, VERSION
from humanwork_core.resources.names import INSTANCES, TASKS

KINDS = (INSTANCES, TASKS)
KIND_OF = {INSTANCES: "AgentInstance", TASKS: "AgenticTask"}
API_VERSION = f"{GROUP}/{VERSION}"
RESTORED_FROM_UID = "humanwork.io/restored-from-uid"
RESTORED_NOTE = (
    "restored from a backup taken before this step finished: it may have reached its "
    "upstream after the backup; an expert checks the upstream and resolves it"
)
_KEEP_METADATA = ("name", "namespace", "labels", "annotations")


async def export(kube: Kube) -> dict[str, list[dict[str, Any]]]:
    """Every AgentInstance and AgenticTask of the cluster, with its status."""
    found: dict[str, list[dict[str, Any]]] = {}
    for plural in KINDS:
        found[plural] = []
        async for items, _ in kube.list_pages(cluster_path(API_VERSION, KIND_OF[plural])):
            found[plural] += [
                {k: v for k, v in item.items() if k != "metadata"}
                | {"metadata": _metadata(item["metadata"], keep_uid=True)}
                for item in items
            ]
    return found


def _metadata(meta: dict[str, Any], *, keep_uid: bool) -> dict[str, Any]:
    kept = {k: copy.deepcopy(meta[k]) for k in _KEEP_METADATA if meta.get(k)}
    if keep_uid and meta.get("uid"):
        kept["uid"] = meta["uid"]
    return kept


def _approved_tool_step(entry: dict[str, Any], tools: dict[str, bool]) -> bool:
    decision = entry.get("decision") or {}
    return bool(decision) and decision.get("verdict") != "reject" and tools.get(entry["id"], False)


def reconcile_status(task: dict[str, Any], now: datetime) -> tuple[dict[str, Any], list[str]]:
    """The task's status as it is written back, and the steps made `OutcomeUnknown`."""
    status = copy.deepcopy(task.get("status") or {})
    tools = {
        s["id"]: bool(s.get("tool")) and s.get("kind", "action") == "action"
        for s in task["spec"].get("steps", [])
    }
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    unknown: list[str] = []
    for entry in status.get("steps", []):
        if not _approved_tool_step(entry, tools):
            continue
        run = entry.get("execution") or {}
        state = run.get("state")
        if state in ("Succeeded", "Failed"):
            continue
        resolution = entry.get("resolution") or {}
        attempt = int(run.get("attempt") or 1)
        if state == "OutcomeUnknown" and resolution.get("attempt") != attempt:
            continue  # already waiting for an expert
        if state == "OutcomeUnknown":
            attempt += 1  # resolved, and maybe run again after the backup
        entry["execution"] = {
            "state": "OutcomeUnknown",
            "attempt": attempt,
            "startedAt": run.get("startedAt") or stamp,
            "finishedAt": stamp,
            "error": RESTORED_NOTE,
        }
        unknown.append(entry["id"])
    return status, unknown


@dataclass
class Applied:
    """What re-applying the resources did."""

    created: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k in KINDS})
    kept: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k in KINDS})
    failed: dict[str, str] = field(default_factory=dict)
    unknown_steps: dict[str, list[str]] = field(default_factory=dict)
    uids: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Re-created tasks: `<namespace>/<name>` -> (uid in the backup, new uid)."""


async def _create(kube: Kube, plural: str, item: dict[str, Any]) -> dict[str, Any]:
    meta = _metadata(item["metadata"], keep_uid=False)
    if plural == TASKS and item["metadata"].get("uid"):
        meta.setdefault("annotations", {})[RESTORED_FROM_UID] = item["metadata"]["uid"]
    body = {"apiVersion": API_VERSION, "kind": KIND_OF[plural], "metadata": meta}
    body["spec"] = item["spec"]
    return await kube.create(body)


async def _write_status(kube: Kube, created: dict[str, Any], status: dict[str, Any]) -> None:
    """Write `status` under the resourceVersion, again when the operator wrote meanwhile;
    the operator's own fields are taken from what it wrote."""
    meta = created["metadata"]
    for _ in range(20):
        live = await kube.call(
            "GET", path_for(API_VERSION, "AgenticTask", meta["namespace"], meta["name"])
        )
        merged = {**(live.get("status") or {}), **status}
        try:
            # the live metadata carries its resourceVersion: a 409 when it changed since
            await kube.replace({**live, "status": merged}, subresource="status")
            return
        except KubeError as exc:
            if exc.status != 409:
                raise
            await asyncio.sleep(0.2)
    raise RuntimeError(f"the status of {meta['namespace']}/{meta['name']} kept changing")


async def apply(kube: Kube, resources: dict[str, list[dict[str, Any]]]) -> Applied:
    """Create what is missing (AgentInstances first), keep what exists (module docstring)."""
    applied, now = Applied(), datetime.now(UTC)
    for plural in KINDS:
        for item in resources.get(plural, []):
            key = f"{item['metadata']['namespace']}/{item['metadata']['name']}"
            try:
                created = await _create(kube, plural, item)
            except KubeError as exc:
                if exc.status == 409:
                    applied.kept[plural].append(key)
                else:
                    applied.failed[f"{plural}/{key}"] = f"{exc.status} {exc.reason}"
                continue
            applied.created[plural].append(key)
            if plural == TASKS:
                status, unknown = reconcile_status(item, now)
                if status:
                    await _write_status(kube, created, status)
                applied.unknown_steps[key] = unknown
                applied.uids[key] = (item["metadata"].get("uid", ""), created["metadata"]["uid"])
    return applied
