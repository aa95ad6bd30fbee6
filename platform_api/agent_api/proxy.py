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

Keys are scoped per agent (`(org, agent, key)`): one agent's keys never pre-empt, block or
replay another agent's calls, read keys included.

How an upstream failure ends the claim depends on what it says about the side effect:
- definitely not sent (connection refused, DNS failure, connect timeout; or a failure
  before any request, such as missing credentials), or a read that failed: the claim is
  released, and a retry may call again;
- definitely refused (the upstream answered 4xx to the write): stored as the key's result
  and replayed to every retry;
- maybe applied (a read or write timeout, a connection broken after the request was sent,
  a 5xx answer to a write, a claim left by a platform that died mid-call, older than
  `STALE_CLAIM_SECONDS`): the claim is kept in state `unknown` and the call answers 409
  `tool_call_outcome_unknown`; every later call for the step answers the same without
  touching the upstream, until an expert resolves it (`human_tasks.resolve`): `applied`
  finishes the row (the next call replays it and the step completes), `not_applied`
  releases it (the agent may call once more).
Where the action sets an absolute value, a read settles "maybe applied" first
(`readback`): the upstream holding exactly the approved value finishes the claim as
applied. The adapters never retry a write themselves (`upstreams.base.Exchange.send`), and send the
step's key as the upstream's `Idempotency-Key`.
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
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from humanwork_core import taskflow
from humanwork_core.resources import AgenticTask
from platform_api.agent_api import readback
from platform_api.agent_api.auth import Agent
from platform_api.audit.service import record
from platform_api.errors import (
    IdempotencyConflict,
    IntegrationEndpointRefused,
    IntegrationMissing,
    InvalidToolParams,
    KubernetesUnavailable,
    NotFound,
    PlatformError,
    ScopeMissing,
    StepNotApproved,
    ToolCallInProgress,
    ToolCallOutcomeUnknown,
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
from platform_api.tools.upstreams.base import OUTCOME_NOT_SENT, OUTCOME_UNKNOWN
from platform_api.tools.upstreams.egress import EgressRefused

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
    if row.state == "unknown" or (
        row.state == "started" and (now - row.created_at).total_seconds() > STALE_CLAIM_SECONDS
    ):
        raise outcome_unknown(row)
    if row.state == "started":
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


def outcome_unknown(row: ToolCall) -> ToolCallOutcomeUnknown:
    """The answer to every call of a step whose side effect may or may not have happened."""
    return ToolCallOutcomeUnknown(
        "an earlier call for this step reached the upstream and its outcome is unknown; "
        "an expert must resolve it",
        key=row.idempotency_key,
        task=row.task or "",
        step=row.step or "",
    )


def _map_upstream(exc: upstreams.UpstreamError) -> PlatformError:
    if isinstance(exc, upstreams.UnknownTool):
        return UnknownTool(str(exc.message))
    if isinstance(exc, upstreams.UnknownAction):
        return UnknownAction(str(exc.message))
    if isinstance(exc, upstreams.InvalidParams):
        return InvalidToolParams(str(exc.message))
    if isinstance(exc, EgressRefused):
        return IntegrationEndpointRefused(
            str(exc.message),
            field=exc.field,
            reason=exc.reason,
        )
    if isinstance(exc, upstreams.MissingCredentials):
        return IntegrationMissing(str(exc.message))
    failed = UpstreamFailed(str(exc.message))
    failed.details["upstreamStatus"] = str(exc.status)
    outcome = exc.details.get("outcome")
    if isinstance(outcome, str):
        failed.details["outcome"] = outcome
    if exc.details.get("applied"):
        failed.details["partlyApplied"] = "true"
    upstream_status = exc.details.get("upstream_status")
    if isinstance(upstream_status, int):
        failed.details["upstreamAnswered"] = str(upstream_status)
    return failed


def settle(error: PlatformError | None, side_effecting: bool) -> str:
    """What becomes of a claim after the call: `done`, `failed` (stored and replayed),
    `unknown` (kept for an expert) or `release` (deleted: a retry may call again).

    The adapters mark every error that follows a write with `outcome` (`unknown`,
    `refused` or `not_sent`); an error without one came before any write went out."""
    if error is None:
        return "done"
    if isinstance(error, IntegrationMissing | Unavailable):
        return "release"  # failed before any request
    outcome = error.details.get("outcome")
    if side_effecting and outcome == OUTCOME_UNKNOWN:
        return "unknown"
    if side_effecting and error.details.get("partlyApplied"):
        return "failed"  # part of the action happened for sure: never again
    if outcome == OUTCOME_NOT_SENT or error.details.get("upstreamAnswered") == "429":
        return "release"  # nothing left, or rate-limited: nothing happened
    if outcome is None and error.status_code >= 500:
        return "release"  # a read (or the reads before a write) failed: nothing changed
    return "failed"


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


def step_key(task: AgenticTask, step_id: str) -> str:
    """The ledger key of an approved step's side effect (also sent upstream as the
    `Idempotency-Key`): one approval, one side effect, whatever key the agent sends."""
    return f"step:{task.metadata.uid or task.metadata.name}/{step_id}"


async def _claim(
    proxy: Proxy, agent: Agent, tool: str, body: ToolCallIn, key: str, request_hash: str
) -> ToolCallOut | None:
    """Claim `key` for this agent (a row committed before the upstream is called); the
    stored answer (or its refusal) when the key was claimed before."""
    org_id, now = uuid.UUID(agent.org_id), datetime.now(UTC)
    async with proxy.sessions() as session:
        try:
            async with session.begin():
                session.add(
                    ToolCall(
                        org_id=org_id,
                        agent_id=agent.agent_id,
                        idempotency_key=key,
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
                existing = await session.get(ToolCall, (org_id, agent.agent_id, key))
            if existing is None:  # released between our insert and our read
                raise ToolCallInProgress("a call with this key is running", key=key) from None
            return _replay(existing, request_hash, now)
    return None


async def _settle_claim(
    session: AsyncSession,
    agent: Agent,
    key: str,
    result: dict[str, Any],
    error: PlatformError | None,
    side_effecting: bool,
) -> PlatformError | None:
    """End the claim as `settle` says; the error to answer (outcome unknown replaces the
    upstream's own error for a side effect that may have happened)."""
    pk = (uuid.UUID(agent.org_id), agent.agent_id, key)
    row = await session.get(ToolCall, pk, with_for_update=True)
    if row is None:
        return error
    verdict = settle(error, side_effecting)
    if verdict == "release":
        await session.delete(row)
        return error
    row.state = verdict
    row.status_code = 200 if error is None else error.status_code
    row.result = result if error is None else error.to_dict()
    row.finished_at = datetime.now(UTC)
    return outcome_unknown(row) if verdict == "unknown" else error


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
        key = step_key(task, str(body.step))
    request_hash = _request_hash(tool, body)
    if key is not None:
        stored = await _claim(proxy, agent, tool, body, key, request_hash)
        if stored is not None:
            return stored
    started = time.perf_counter()
    result: dict[str, Any] = {}
    error: PlatformError | None = None
    credentials: dict[str, Any] = {}
    try:
        async with proxy.sessions() as session, session.begin():
            credentials = await _credentials(proxy, session, org_id, adapter.integration_type)
        result = await adapter.call(
            body.action, params, credentials, client=proxy.http, idempotency_key=key or ""
        )
        result = upstreams.sanitise(result, _secret_values(credentials))
    except upstreams.UpstreamError as exc:
        error = _map_upstream(exc)
    except PlatformError as exc:
        error = exc
    upstream_error, read_back = error, None
    if key is not None and settle(error, spec.side_effect) == "unknown":
        confirmed = await readback.confirm_applied(
            adapter, body.action, params, credentials, proxy.http
        )
        read_back = "confirmed" if confirmed is not None else "inconclusive"
        if confirmed is not None:
            result, error = upstreams.sanitise(confirmed, _secret_values(credentials)), None
    elapsed_ms = round((time.perf_counter() - started) * 1000, 1)
    async with proxy.sessions() as session, session.begin():
        if key is not None:
            error = await _settle_claim(session, agent, key, result, error, spec.side_effect)
        await record(
            session,
            actor=f"agent:{agent.agent_id}",
            action="tool.called",
            target=f"tool:{tool}.{body.action}",
            org_id=org_id,
            outcome="success" if error is None else "failure",
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
                "upstream_error": upstream_error.code if upstream_error is not None else None,
                "read_back": read_back,
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
