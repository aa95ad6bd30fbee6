"""The tool proxy (`POST /v1/agent-api/tools/{tool}`): agents act only through it, and only
as far as a human approved.

For every call, in order: the token's `tools:execute` scope; the tool is known, the org
enabled it and the AgentInstance lists it; for a side-effecting action, the named step of
the named AgenticTask (read from the API server now, never from a cache) has a decision
approving exactly this step, this tool and these parameters (`taskflow.authorize_tool_call`,
edited parameters included), earlier steps have executed and the step has not finished.
Then the idempotency record: the first call with a key claims it (a row committed before
the upstream is called, so two concurrent calls with one key cannot both reach the
upstream); a repeat returns the stored result without calling the upstream again; a key
reused for another request is refused. A side-effecting call is keyed by its approved
step (task uid and step id) whatever key the agent sends: one approval, one side effect,
however many keys a compromised agent invents. Then the org's credentials are decrypted, the
upstream adapter is called, the result is sanitised (no credential can come back) and
`tool.called` is written to the audit log with the outcome.

An upstream failure that says nothing happened (the upstream answered 4xx or 5xx) is
stored as the key's result only for 4xx; for a 5xx or an unreachable upstream the claim is
released so that a retry with the same key may call again. A claim left by a platform that
died mid-call answers `tool_call_in_progress` until `STALE_CLAIM_SECONDS` pass and is then
reported as `tool_call_outcome_unknown`: a human must look, since the side effect may or
may not have happened.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import delete
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from humanwork_core import taskflow
from humanwork_core.resources import AgenticTask
from platform_api.agent_api.auth import Agent
from platform_api.audit.service import record
from platform_api.errors import (
    Conflict,
    IdempotencyConflict,
    IntegrationMissing,
    InvalidToolParams,
    KubernetesUnavailable,
    NotFound,
    PlatformError,
    ScopeMissing,
    StepNotApproved,
    ToolCallInProgress,
    ToolNotPermitted,
    Unavailable,
    UnknownAction,
    UnknownTool,
    UpstreamFailed,
)
from platform_api.integrations.crypto import CredentialCipher, Sealed
from platform_api.integrations.repository import IntegrationRepository
from platform_api.kube.client import KubeClient, KubeNotFound
from platform_api.models import Org, ToolCall
from platform_api.tools import upstreams
from platform_api.tools.repository import ToolPermissionRepository

log = logging.getLogger(__name__)

TOOLS_SCOPE = "tools:execute"
STALE_CLAIM_SECONDS = 300


class ToolCallIn(BaseModel):
    """What the agent asks the proxy to run."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "action": "setInventoryLevel",
                    "params": {
                        "inventory_item_id": 808950810,
                        "location_id": 655441491,
                        "available": 42,
                    },
                    "idempotencyKey": "reconcile-october/2",
                    "task": "reconcile-october",
                    "step": "2",
                }
            ]
        },
    )

    action: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z][A-Za-z0-9_]*$")
    params: dict[str, Any] = Field(default_factory=dict)
    idempotencyKey: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="required for side-effecting actions; a repeat returns the first result",
    )
    task: str | None = Field(
        default=None, max_length=253, description="the AgenticTask (name) the call belongs to"
    )
    step: str | None = Field(default=None, max_length=100, description="the approved step's id")


class ToolCallOut(BaseModel):
    """A tool's sanitised result."""

    tool: str
    action: str
    result: dict[str, Any]
    replayed: bool = Field(description="true when this is the stored result of an earlier call")
    sideEffecting: bool


@dataclass(frozen=True)
class Proxy:
    """What the proxy needs besides the request."""

    sessions: async_sessionmaker[AsyncSession]
    kube: KubeClient | None
    cipher: CredentialCipher | None
    http: httpx.AsyncClient


def _request_hash(tool: str, body: ToolCallIn) -> str:
    payload = {
        "tool": tool,
        "action": body.action,
        "params": body.params,
        "task": body.task,
        "step": body.step,
    }
    return hashlib.sha256(taskflow.canonical_json(payload)).hexdigest()


async def _check_approval(
    proxy: Proxy, agent: Agent, tool: str, body: ToolCallIn, now: datetime
) -> tuple[AgenticTask, dict[str, Any]]:
    """The task and the parameters its approved step runs with, or StepNotApproved."""
    if not body.task or not body.step:
        raise StepNotApproved(
            "a side-effecting action must name the approved task and step", reason="no_step"
        )
    if proxy.kube is None:
        raise KubernetesUnavailable("the tool proxy needs the Kubernetes API")
    try:
        raw = await proxy.kube.get_task(agent.namespace, body.task)
    except KubeNotFound:
        raise StepNotApproved("no such task", reason="task_not_found") from None
    task = AgenticTask.from_wire(raw)
    if task.spec.agent_ref.name != agent.name or task.spec.org_id != agent.org_id:
        raise StepNotApproved("the task belongs to another agent", reason="not_this_agent")
    try:
        approved = taskflow.authorize_tool_call(
            task,
            body.step,
            tool=tool,
            parameters={"action": body.action, "params": body.params},
            now=now,
        )
    except taskflow.TaskFlowError as exc:
        raise StepNotApproved(exc.message, reason=exc.code, step=body.step) from None
    return task, dict(approved)


def _replay(row: ToolCall, request_hash: str, now: datetime) -> ToolCallOut:
    if row.request_hash != request_hash:
        raise IdempotencyConflict(
            "this idempotency key was used for another call", key=row.idempotency_key
        )
    if row.state == "started":
        age = (now - row.created_at).total_seconds()
        if age > STALE_CLAIM_SECONDS:
            raise Conflict(
                "an earlier call with this key never finished; its outcome is unknown",
                reason="tool_call_outcome_unknown",
                key=row.idempotency_key,
            )
        raise ToolCallInProgress("a call with this key is running", key=row.idempotency_key)
    if row.state == "failed":
        error = row.result
        exc = UpstreamFailed(str(error.get("message", "the upstream refused the call")))
        exc.details.update({"replayed": "true", "upstreamCode": str(error.get("code", ""))})
        raise exc
    return ToolCallOut(
        tool=row.tool,
        action=row.action,
        result=row.result,
        replayed=True,
        sideEffecting=True,
    )


def _map_upstream(exc: upstreams.UpstreamError) -> PlatformError:
    if isinstance(exc, upstreams.UnknownTool):
        return UnknownTool(str(exc.message))
    if isinstance(exc, upstreams.UnknownAction):
        return UnknownAction(str(exc.message))
    if isinstance(exc, upstreams.InvalidParams):
        return InvalidToolParams(str(exc.message))
    if isinstance(exc, upstreams.MissingCredentials):
        return IntegrationMissing(str(exc.message))
    failed = UpstreamFailed(str(exc.message))
    failed.details["upstreamStatus"] = str(exc.status)
    return failed


async def _credentials(
    proxy: Proxy, session: AsyncSession, org_id: uuid.UUID, integration_type: str
) -> dict[str, Any]:
    if proxy.cipher is None:
        raise Unavailable("integration credentials are not configured (HUMANWORK_CREDENTIALS_KEYS)")
    row = await IntegrationRepository(session).get(org_id, integration_type)
    if row is None:
        raise IntegrationMissing(
            f"the org has no {integration_type} credentials", integration=integration_type
        )
    plaintext = proxy.cipher.open(
        org_id, integration_type, Sealed(row.key_id, row.nonce, row.ciphertext)
    )
    loaded: dict[str, Any] = json.loads(plaintext)
    return loaded


def _summary(result: dict[str, Any]) -> dict[str, Any]:
    """What the audit log keeps of a result: its shape, not its data."""
    return {
        key: (len(value) if isinstance(value, list) else type(value).__name__)
        for key, value in list(result.items())[:20]
    }


async def call_tool(proxy: Proxy, agent: Agent, tool: str, body: ToolCallIn) -> ToolCallOut:
    """Run one tool call for `agent`, as the module docstring says."""
    now = datetime.now(UTC)
    if TOOLS_SCOPE not in agent.scopes:
        raise ScopeMissing(f"the token lacks the {TOOLS_SCOPE} scope")
    try:
        adapter = upstreams.adapter_for(tool)
    except upstreams.UpstreamError as exc:
        raise _map_upstream(exc) from None
    spec = adapter.actions.get(body.action)
    if spec is None:
        raise UnknownAction(f"{tool} has no action {body.action!r}", tool=tool)
    org_id = uuid.UUID(agent.org_id)
    if tool not in agent.enabled_tools:
        raise ToolNotPermitted(f"the agent's enabledTools do not include {tool!r}", tool=tool)
    async with proxy.sessions() as session, session.begin():
        if await session.get(Org, org_id) is None:
            raise NotFound("the agent's org is not registered with the platform")
        permission = await ToolPermissionRepository(session).get(org_id, tool)
        if permission is None or not permission.enabled:
            raise ToolNotPermitted(f"the org has not enabled {tool!r}", tool=tool)
    params = body.params
    key = body.idempotencyKey
    if spec.side_effect:
        if not body.idempotencyKey:
            raise InvalidToolParams("a side-effecting action needs an idempotencyKey")
        task, approved = await _check_approval(proxy, agent, tool, body, now)
        params = dict(approved.get("params") or {})
        # One approval, one side effect: whatever key the agent sends, a side-effecting call
        # is deduplicated by the approved step itself, so fresh keys cannot repeat it.
        key = f"step:{task.metadata.uid or task.metadata.name}/{body.step}"
    request_hash = _request_hash(tool, body)
    if key is not None:
        async with proxy.sessions() as session:
            try:
                async with session.begin():
                    session.add(
                        ToolCall(
                            org_id=org_id,
                            idempotency_key=key,
                            agent_id=agent.agent_id,
                            tool=tool,
                            action=body.action,
                            task=body.task,
                            step=body.step,
                            request_hash=request_hash,
                            state="started",
                            status_code=0,
                            result={},
                            created_at=now,
                        )
                    )
            except IntegrityError:
                async with session.begin():
                    existing = await session.get(ToolCall, (org_id, key))
                if existing is None:  # released between our insert and our read
                    raise ToolCallInProgress("a call with this key is running", key=key) from None
                return _replay(existing, request_hash, now)
    started = time.perf_counter()
    outcome, result, error = "success", {}, None
    credentials: dict[str, Any] = {}
    try:
        async with proxy.sessions() as session, session.begin():
            credentials = await _credentials(proxy, session, org_id, adapter.integration_type)
        result = await adapter.call(
            body.action, params, credentials, client=proxy.http, idempotency_key=key or ""
        )
        result = upstreams.sanitise(result, _secret_values(credentials))
    except upstreams.UpstreamError as exc:
        outcome, error = "failure", _map_upstream(exc)
    except PlatformError as exc:
        outcome, error = "failure", exc
    elapsed_ms = round((time.perf_counter() - started) * 1000, 1)
    async with proxy.sessions() as session, session.begin():
        if key is not None:
            row = await session.get(ToolCall, (org_id, key), with_for_update=True)
            release = error is not None and (
                error.status_code >= 500 or isinstance(error, IntegrationMissing | Unavailable)
            )
            if row is not None and release:
                await session.execute(
                    delete(ToolCall).where(
                        ToolCall.org_id == org_id, ToolCall.idempotency_key == key
                    )
                )
            elif row is not None:
                row.state = "done" if error is None else "failed"
                row.status_code = 200 if error is None else error.status_code
                row.result = result if error is None else error.to_dict()
                row.finished_at = datetime.now(UTC)
        await record(
            session,
            actor=f"agent:{agent.agent_id}",
            action="tool.called",
            target=f"tool:{tool}.{body.action}",
            org_id=org_id,
            outcome=outcome,
            details={
                "tool": tool,
                "action": body.action,
                "params": upstreams.sanitise(params, _secret_values(credentials)),
                "task": body.task,
                "step": body.step,
                "idempotency_key": key,
                "agent_idempotency_key": body.idempotencyKey,
                "side_effecting": spec.side_effect,
                "duration_ms": elapsed_ms,
                "result_summary": _summary(result) if error is None else {},
                "error": error.code if error is not None else None,
            },
        )
    if error is not None:
        raise error
    return ToolCallOut(
        tool=tool,
        action=body.action,
        result=result,
        replayed=False,
        sideEffecting=spec.side_effect,
    )


NOT_SECRET = frozenset({"baseUrl", "tokenUrl", "shopDomain", "apiVersion", "marketplaceId"})
"""Credential fields that only locate the upstream; everything else is redacted on sight."""


def _secret_values(credentials: dict[str, Any]) -> list[str]:
    return [
        str(v)
        for k, v in credentials.items()
        if k not in NOT_SECRET and isinstance(v, str) and len(v) >= 4
    ]
