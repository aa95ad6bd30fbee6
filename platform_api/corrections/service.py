"""Correction use cases: make one from an expert's decision, keep it (audited), list an
org's, and push them to the org's agents (`/v1/corrections`, signed).

A correction is made when an expert edits a draft reply (`reply_edit`: the text sent
instead), rejects one (`reply_rejected`: the feedback), amends a step's parameters
(`step_edit`: the parameters before and after, as JSON) or rejects a step
(`step_rejected`: the feedback). It is pushed to every AgentInstance of the org at once
(best effort: an agent that is down misses it), and the org's newest `CHAT_CORRECTIONS`
ride along with every chat command (`chat_payload`), so an agent that restarted, or a new
replica, has them before it drafts: the platform's table is the source of truth.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from humanwork_core.resources import AgenticTask, Verdict
from platform_api.agents.commands import AgentCommands, AgentTarget
from platform_api.corrections.repository import CorrectionRepository
from platform_api.errors import PlatformError
from platform_api.floor.audit.service import record
from platform_api.kube.client import KubeClient, KubeError
from platform_api.models import ExpertCorrection, Org

log = logging.getLogger(__name__)

CHAT_CORRECTIONS = 200
"""How many of the org's newest corrections each chat command carries."""


def step_correction(
    task: AgenticTask,
    step_id: str,
    verdict: Verdict,
    *,
    parameters: Mapping[str, Any] | None,
    feedback: str | None,
    by: str,
) -> ExpertCorrection | None:
    """The correction an expert's decision on a step makes (None for any other than an
    edit of its parameters or a rejection with feedback)."""
    step = task.step(step_id)
    if step is None:
        return None
    source = f"step:{task.metadata.namespace}/{task.metadata.name}/{step_id}"
    base: dict[str, Any] = {
        "org_id": uuid.UUID(task.spec.org_id),
        "message": task.spec.description,
        "source": source,
        "conversation_id": uuid.UUID(task.spec.conversation_id)
        if task.spec.conversation_id
        else None,
        "by": by,
    }
    before = json.dumps(dict(step.parameters), sort_keys=True)
    if verdict is Verdict.EDIT and parameters is not None:
        after = json.dumps(dict(parameters), sort_keys=True)
        return ExpertCorrection(
            id=uuid.uuid4(), kind="step_edit", draft=before, corrected=after, note=feedback, **base
        )
    if verdict is Verdict.REJECT and feedback:
        return ExpertCorrection(
            id=uuid.uuid4(), kind="step_rejected", draft=before, corrected=feedback, **base
        )
    return None


async def keep(session: AsyncSession, correction: ExpertCorrection) -> ExpertCorrection:
    """Store `correction` and audit it as `correction.recorded`."""
    stored = await CorrectionRepository(session).add(correction)
    await record(
        session,
        actor=correction.by,
        action="correction.recorded",
        target=f"correction:{stored.id}",
        org_id=correction.org_id,
        details={"kind": correction.kind, "source": correction.source},
    )
    return stored


def to_command(correction: ExpertCorrection) -> dict[str, Any]:
    """A correction as the agent's `/v1/corrections` and chat commands take it."""
    return {
        "id": str(correction.id),
        "kind": correction.kind,
        "message": correction.message,
        "corrected": correction.corrected,
        "draft": correction.draft,
        "note": correction.note,
        "conversationId": str(correction.conversation_id) if correction.conversation_id else None,
        "by": correction.by,
        "at": correction.created_at.isoformat() if correction.created_at else None,
    }


async def chat_payload(session: AsyncSession, org_id: uuid.UUID) -> list[dict[str, Any]]:
    """The org's newest corrections, for a chat command."""
    rows = await CorrectionRepository(session).newest(org_id, CHAT_CORRECTIONS)
    return [to_command(c) for c in rows]


async def push(
    commands: AgentCommands,
    kube: KubeClient | None,
    org: Org,
    corrections: list[ExpertCorrection],
) -> list[str]:
    """Send `corrections` to every agent of `org`; the agents that took them (an agent
    that cannot be reached gets them with its next chat command)."""
    if not corrections or kube is None:
        return []
    try:
        instances = await kube.list_agent_instances(org.namespace)
    except KubeError as exc:
        log.warning("cannot list the agents of %s: %s", org.namespace, exc.reason)
        return []
    payload = {"corrections": [to_command(c) for c in corrections]}
    reached = []
    for instance in instances:
        if str((instance.get("spec") or {}).get("orgId")) != str(org.id):
            continue
        target = AgentTarget(org=org, name=str(instance["metadata"]["name"]), instance=instance)
        try:
            await commands.send(target, "/v1/corrections", payload)
        except PlatformError as exc:
            log.warning("correction not pushed to %s: %s", target.agent_id, exc.code)
            continue
        reached.append(target.agent_id)
    return reached


@dataclass
class CorrectionPusher:
    """Pushes corrections made while deciding a step to the org's agents, in the
    background (a decision does not wait for its agents)."""

    sessions: async_sessionmaker[AsyncSession]
    kube: KubeClient | None
    commands: AgentCommands
    _running: set[asyncio.Task[list[str]]] = field(default_factory=set)

    def soon(self, org_id: uuid.UUID, corrections: list[ExpertCorrection]) -> None:
        """Push `corrections` of `org_id` after this moment."""
        task = asyncio.create_task(self._push(org_id, corrections))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _push(self, org_id: uuid.UUID, corrections: list[ExpertCorrection]) -> list[str]:
        async with self.sessions() as session:
            org = await session.get(Org, org_id)
        return [] if org is None else await push(self.commands, self.kube, org, corrections)
