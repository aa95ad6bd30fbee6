"""The tool proxy (`POST /v1/agent-api/tools/{tool}`): agents act only through it, and only
as far as a human approved.

For every call, in order: the token's `tools:execute` scope; the tool is known, the org
enabled it and the AgentInstance lists it; the org's config of the tool allows the action
(`allowedActions`, else 403 `tool_action_not_allowed`); for a side-effecting action, the
named step of the named AgenticTask (read from the API server now, never from a cache)
has a decision approving exactly this step, this tool and these parameters
(`taskflow.authorize_tool_call`, edited parameters included), the initiating client
confirmed this version of the step where the platform's own rules say it must
(`floor.confirmers`, recomputed here from trusted data), earlier steps have executed
and the step has not finished, and nobody asked to cancel the task (its annotation
`humanwork.io/cancel-requested`: 409 `task_cancel_requested` at once, whether or not the
operator has moved it to `Cancelled` yet; audited as a refused `tool.called`); then one
call of the org's hourly allowance of the tool (`ratePerHour`, counted in the database:
`limits.take`; else 429 `tool_rate_limited` with Retry-After).

Then the idempotency record (`ledger.ToolCallLedger`): the first call with a key claims it
(a row committed before the upstream is called, so two concurrent calls with one key
cannot both reach the upstream); a repeat returns the stored result without calling the
upstream again; a key reused for another request is refused. A side-effecting call is
keyed by its approved step (task uid and step id) whatever key the agent sends: one
approval, one side effect, however many keys a compromised agent invents. Then the org's
credentials are decrypted, the upstream adapter is called, the result is sanitised (no
credential can come back) and `tool.called` is written to the audit log with the outcome.
A call the upstream answered, whatever its status, gets the platform's signed receipt
(`humanwork_core.receipts`, signed by `tools.receipts.ReceiptSigner`: the task uid, the
step, the call's digest, who approved and confirmed the step and when, the policy version,
the answer's status and digest, the time), kept in the ledger row and the `tool.called`
entry in that same transaction and returned with a result; a replay answers the row's
receipt, never a new one. A call that got no answer (refused before it was sent, never
connected, timed out) gets none.

Keys are scoped per agent (`(org, agent, key)`): one agent's keys never pre-empt, block or
replay another agent's calls, read keys included.

How an upstream failure ends the claim depends on what it says about the side effect:
- definitely not sent (connection refused, DNS failure, connect timeout; or a failure
  before any request, such as missing credentials), or a read that failed: the claim is
  released, and a retry may call again;
- definitely refused (the upstream answered 4xx to the write): stored as the key's result
  and replayed to every retry;
- maybe applied (a read or write timeout, a connection broken after the request was sent,
  a 5xx answer to a write, a claim left `started` by a platform that died mid-call, past
  its lease `tool_claim_lease_seconds`): the claim is kept in state `unknown` and the
  call answers 409 `tool_call_outcome_unknown`; every later call for the step answers
  the same without touching the upstream, until an expert resolves it
  (`human_tasks.resolve`): `applied` finishes the row (the next call replays it and the
  step completes), `not_applied` releases it (the agent may call once more).
Where the action sets an absolute value, a read settles "maybe applied" first
(`readback`): the upstream holding exactly the approved value finishes the claim as
applied. The adapters never retry a write themselves (`upstreams.base.Exchange.send`), and send the
step's key as the upstream's `Idempotency-Key`.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any

import httpx
from fastapi import Depends
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from humanwork_core import catalog, keys, receipts, taskflow, tracing
from humanwork_core.resources import AgenticTask
from platform_api.agent_api import limits, readback
from platform_api.agent_api.identity import Agent
from platform_api.agent_api.ledger import (
    STALE_CLAIM_SECONDS,
    Claim,
    ToolCallLedger,
    request_hash,
    settle,
    step_key,
)
from platform_api.agent_api.schemas import ToolCallIn, ToolCallOut
from platform_api.errors import (
    KubernetesUnavailable,
    NotFound,
    PlatformError,
    ScopeMissing,
    StepNotApproved,
    TaskCancelRequested,
    ToolNotPermitted,
    Unavailable,
)
from platform_api.floor.audit.service import record
from platform_api.floor.confirmers import steps_to_confirm
from platform_api.integrations.crypto import CredentialCipher, Sealed
from platform_api.integrations.repository import IntegrationRepository
from platform_api.kube.client import KubeClient, KubeNotFound
from platform_api.models import Org
from platform_api.slots import Slot
from platform_api.tools import config as tool_config
from platform_api.tools import upstreams
from platform_api.tools.config import ToolConfig
from platform_api.tools.receipts import ReceiptSigner
from platform_api.tools.repository import ToolPermissionRepository
from platform_api.tools.upstreams.errors import InvalidParams, MissingCredentials, UnknownAction
from platform_api.tools.upstreams.web import WebLimits

log = logging.getLogger(__name__)

TOOLS_SCOPE = "tools:execute"

NOT_SECRET = frozenset({"baseUrl", "tokenUrl", "shopDomain", "apiVersion", "marketplaceId"})
"""Credential fields that only locate the upstream; everything else is redacted on sight."""


@dataclass(frozen=True)
class Authorised:
    """A call the proxy may make: the adapter, the action, the parameters it runs with
    (an approved step's, edits included) and its ledger key (None for a read without one)."""

    adapter: upstreams.Adapter
    spec: catalog.Action
    params: dict[str, Any]
    key: str | None
    config: ToolConfig
    policy: dict[str, Any]
    """The rules the call was judged by (`receipts.policy_version`)."""
    task: AgenticTask | None = None


@dataclass
class Performed:
    """What the upstream call gave: a result or an error, and what the audit keeps."""

    result: dict[str, Any]
    error: PlatformError | None
    upstream_error: PlatformError | None
    read_back: str | None
    secrets: list[str]
    elapsed_ms: float
    answered: list[int] = field(default_factory=list)
    """The HTTP status of each answer the upstream gave, in order (none: not reached)."""
    answer_status: int | None = None
    """The status of the answer the result or error reflects: the call's last answer, or
    the read-back's when it settled the call (None: no answer, no receipt)."""


@dataclass
class ToolProxy:
    """The tool proxy, built once by the app (`Tools` hands it to a route): its sessions,
    Kubernetes client, credential cipher, upstream client and ledger."""

    sessions: async_sessionmaker[AsyncSession]
    kube: KubeClient | None
    cipher: CredentialCipher | None
    http: httpx.AsyncClient | None
    web: WebLimits = field(default_factory=WebLimits)
    """The platform's limits of `web.fetch`."""
    claim_lease_seconds: float = STALE_CLAIM_SECONDS
    """How long a claim may stay `started` (`tool_claim_lease_seconds`; see `ledger`)."""
    ledger: ToolCallLedger = field(init=False)
    on_called: Callable[[str, str], None] | None = None
    """Told the tool and the outcome (`success` or the error code) of every call that
    reached the upstream step (the platform's metrics)."""
    receipts: ReceiptSigner | None = None
    """Signs the receipt of every call the upstream answered (None: no receipts)."""

    def __post_init__(self) -> None:
        self.ledger = ToolCallLedger(self.sessions, self.claim_lease_seconds)

    async def call(self, agent: Agent, tool: str, body: ToolCallIn) -> ToolCallOut:
        """Run one tool call for `agent`, as the module docstring says."""
        if self.http is None:
            raise Unavailable("the tool proxy is not running")
        try:
            call = await self._authorise(agent, tool, body)
        except TaskCancelRequested as refused:
            await self._audit_refusal(agent, tool, body, refused)
            raise
        claim = None
        if call.key is not None:
            claim = Claim(
                uuid.UUID(agent.org_id),
                agent.agent_id,
                call.key,
                tool,
                body,
                request_hash(tool, body),
            )
            stored = await self.ledger.claim(claim)
            if stored is not None:
                return stored
        done = await self._perform(agent, call, body, settles=claim is not None)
        receipt = self._receipt(agent, tool, body, call, done)
        error = await self._finish(agent, tool, body, call, claim, done, receipt)
        if error is not None:
            raise error
        return ToolCallOut(
            tool=tool,
            action=body.action,
            result=done.result,
            replayed=False,
            sideEffecting=call.spec.side_effect,
            receipt=receipt,
        )

    def _receipt(
        self, agent: Agent, tool: str, body: ToolCallIn, call: Authorised, done: Performed
    ) -> dict[str, Any] | None:
        """The signed receipt of a call the upstream answered, an error answer included
        (None without a signer, or for a call no answer came to)."""
        if self.receipts is None or done.answer_status is None:
            return None
        task, step = call.task, body.step if call.task is not None else None
        approvals: list[receipts.Signoff] = []
        confirmation: receipts.Signoff | None = None
        if task is not None and step is not None:
            approvals, confirmation = receipts.signoffs(task, step)
        task_policy = None
        if task is not None:
            task_policy = task.spec.policy.model_dump(mode="json", by_alias=True)
        return self.receipts.sign(
            receipts.Facts(
                org=agent.org_id,
                agent=agent.agent_id,
                task=receipts.task_ref(task) if task is not None else None,
                step=step,
                tool=tool,
                action=body.action,
                params=call.params,
                approvals=approvals,
                confirmation=confirmation,
                policy_version=receipts.policy_version(
                    task_policy, call.policy.get("org"), call.policy.get("clientConfirmRisks")
                ),
                answer=done.result if done.error is None else done.error.body(),
                answer_status=done.answer_status,
                at=datetime.now(UTC),
            )
        )

    async def _authorise(self, agent: Agent, tool: str, body: ToolCallIn) -> Authorised:
        """The scope, the tool (known, enabled by the org and the AgentInstance) and, for
        a side-effecting action, the approved step; the call as it may run."""
        if TOOLS_SCOPE not in agent.scopes:
            raise ScopeMissing(f"the token lacks the {TOOLS_SCOPE} scope")
        adapter = upstreams.adapter_for(tool)
        spec = adapter.actions.get(body.action)
        if spec is None:
            raise UnknownAction(f"{tool} has no action {body.action!r}", details={"tool": tool})
        if tool not in agent.enabled_tools:
            raise ToolNotPermitted(f"the agent's enabledTools do not include {tool!r}", tool=tool)
        config, policy = await self._check_permission(uuid.UUID(agent.org_id), tool)
        limits.check_action(config, tool, body.action)
        if not spec.side_effect:
            await self._count(agent, tool, config)
            return Authorised(adapter, spec, body.params, body.idempotencyKey, config, policy)
        if not body.idempotencyKey:
            raise InvalidParams("a side-effecting action needs an idempotencyKey")
        task, approved = await self._check_approval(agent, tool, body)
        params = dict(approved.get("params") or {})
        await self._count(agent, tool, config)
        key = step_key(task, str(body.step))
        return Authorised(adapter, spec, params, key, config, policy, task)

    async def _check_permission(
        self, org_id: uuid.UUID, tool: str
    ) -> tuple[ToolConfig, dict[str, Any]]:
        """The org's config of the tool it enabled and the org's rules a receipt names;
        ToolNotPermitted otherwise (and for a stored config that no longer reads: fail
        closed)."""
        async with self.sessions() as session, session.begin():
            org = await session.get(Org, org_id)
            if org is None:
                raise NotFound("the agent's org is not registered with the platform")
            policy = {
                "org": org.approval_policy,
                "clientConfirmRisks": org.client_confirm_risks,
            }
            permission = await ToolPermissionRepository(session).get(org_id, tool)
            if permission is None or not permission.enabled:
                raise ToolNotPermitted(f"the org has not enabled {tool!r}", tool=tool)
            try:
                return tool_config.parse(tool, dict(permission.config or {})), policy
            except tool_config.InvalidToolConfig as exc:
                raise ToolNotPermitted(
                    f"the org's config of {tool!r} is invalid ({exc.message}); set it again",
                    tool=tool,
                ) from None

    async def _count(self, agent: Agent, tool: str, config: ToolConfig) -> None:
        """Take one call of the org's hourly allowance of the tool."""
        if config.rate_per_hour is None:
            return
        async with self.sessions() as session, session.begin():
            await limits.take(
                session, uuid.UUID(agent.org_id), tool, config.rate_per_hour, datetime.now(UTC)
            )

    async def _check_approval(
        self, agent: Agent, tool: str, body: ToolCallIn
    ) -> tuple[AgenticTask, dict[str, Any]]:
        """The task and the parameters its approved step runs with, or StepNotApproved."""
        if not body.task or not body.step:
            raise StepNotApproved(
                "a side-effecting action must name the approved task and step", reason="no_step"
            )
        if self.kube is None:
            raise KubernetesUnavailable("the tool proxy needs the Kubernetes API")
        try:
            raw = await self.kube.get_task(agent.namespace, body.task)
        except KubeNotFound:
            raise StepNotApproved("no such task", reason="task_not_found") from None
        task = AgenticTask.from_wire(raw)
        if task.spec.agent_ref.name != agent.name or task.spec.org_id != agent.org_id:
            raise StepNotApproved("the task belongs to another agent", reason="not_this_agent")
        if keys.CANCEL_REQUESTED in task.metadata.annotations:
            raise TaskCancelRequested(
                "a cancel of the task was requested: no further tool call runs",
                task=body.task,
                step=body.step,
            )
        try:
            approved = taskflow.authorize_tool_call(
                task,
                body.step,
                tool=tool,
                parameters={"action": body.action, "params": body.params},
                now=datetime.now(UTC),
            )
        except taskflow.TaskFlowError as exc:
            raise StepNotApproved(exc.message, reason=exc.code, step=body.step) from None
        await self._check_confirmation(agent, task, body.step)
        return task, dict(approved)

    async def _check_confirmation(self, agent: Agent, task: AgenticTask, step_id: str) -> None:
        """StepNotApproved (`not_confirmed`) when the platform's own rules, from trusted data
        (`floor.confirmers`), say the step needs the initiating client's confirmation and
        the status holds none for the step's current version, whatever else it says."""
        async with self.sessions() as session, session.begin():
            _client, step_ids = await steps_to_confirm(session, uuid.UUID(agent.org_id), task)
        step = task.step(step_id)
        if step_id not in step_ids or step is None:
            return
        if not taskflow.is_confirmed(step, task.current_status().step(step_id)):
            raise StepNotApproved(
                "the step waits for the initiating client's confirmation of this version",
                reason=taskflow.NotConfirmed.code,
                step=step_id,
            )

    async def _perform(
        self, agent: Agent, call: Authorised, body: ToolCallIn, *, settles: bool
    ) -> Performed:
        """Decrypt the credentials and call the upstream; a write whose outcome is unknown
        is read back where the action allows (`readback`)."""
        assert self.http is not None
        started = time.perf_counter()
        done = Performed({}, None, None, None, [], 0.0)
        with upstreams.answers() as done.answered:
            await self._call_upstream(agent, call, body, done, settles)
        done.elapsed_ms = round((time.perf_counter() - started) * 1000, 1)
        return done

    async def _call_upstream(
        self,
        agent: Agent,
        call: Authorised,
        body: ToolCallIn,
        done: Performed,
        settles: bool,
    ) -> None:
        """`_perform`'s upstream call, its answers noted in `done.answered`."""
        assert self.http is not None
        credentials: dict[str, Any] = {}
        try:
            if call.adapter.needs_credentials:
                credentials = await self._credentials(
                    uuid.UUID(agent.org_id), call.adapter.integration_type
                )
            else:
                credentials = self.web.options(call.config)
            done.secrets = _secret_values(credentials)
            with tracing.span(
                "humanwork.upstream_call", _upstream(call, body.action), kind="client"
            ) as up:
                try:
                    result = await call.adapter.call(
                        body.action,
                        call.params,
                        credentials,
                        client=self.http,
                        idempotency_key=call.key or "",
                    )
                except PlatformError as exc:
                    tracing.annotate(up, {"error.type": exc.code})
                    raise
            done.result = upstreams.sanitise(result, done.secrets)
        except PlatformError as exc:
            done.error = exc
        done.upstream_error = done.error
        done.answer_status = done.answered[-1] if done.answered else None
        if settles and settle(done.error, call.spec.side_effect) == "unknown":
            confirmed = await readback.confirm_applied(
                call.adapter, body.action, call.params, credentials, self.http
            )
            done.read_back = "confirmed" if confirmed is not None else "inconclusive"
            if confirmed is not None:
                done.result, done.error = upstreams.sanitise(confirmed, done.secrets), None
                done.answer_status = done.answered[-1]

    async def _credentials(self, org_id: uuid.UUID, integration_type: str) -> dict[str, Any]:
        if self.cipher is None:
            raise Unavailable(
                "integration credentials are not configured (HUMANWORK_CREDENTIALS_KEYS)"
            )
        async with self.sessions() as session, session.begin():
            row = await IntegrationRepository(session).get(org_id, integration_type)
        if row is None:
            raise MissingCredentials(
                f"the org has no {integration_type} credentials",
                details={"integration": integration_type},
            )
        plaintext = self.cipher.open(
            org_id, integration_type, Sealed(row.key_id, row.nonce, row.ciphertext)
        )
        loaded: dict[str, Any] = json.loads(plaintext)
        return loaded

    async def _audit_refusal(
        self, agent: Agent, tool: str, body: ToolCallIn, refused: PlatformError
    ) -> None:
        """A call refused before any upstream: `tool.called`, outcome failure."""
        async with self.sessions() as session, session.begin():
            await record_tool_call(
                session,
                agent,
                tool,
                body,
                refused,
                agent_idempotency_key=body.idempotencyKey,
                upstream_error=None,
            )

    async def _finish(
        self,
        agent: Agent,
        tool: str,
        body: ToolCallIn,
        call: Authorised,
        claim: Claim | None,
        done: Performed,
        receipt: dict[str, Any] | None,
    ) -> PlatformError | None:
        """End the claim (keeping the receipt with it) and audit the call (`tool.called`,
        the receipt in its details), in one transaction; the error to answer."""
        error = done.error
        async with self.sessions() as session, session.begin():
            if claim is not None:
                error = await self.ledger.finish(
                    session, claim, done.result, error, call.spec.side_effect, receipt
                )
            await record_tool_call(
                session,
                agent,
                tool,
                body,
                error,
                params=upstreams.sanitise(call.params, done.secrets),
                idempotency_key=call.key,
                agent_idempotency_key=body.idempotencyKey,
                side_effecting=call.spec.side_effect,
                duration_ms=done.elapsed_ms,
                result_summary=_summary(done.result) if error is None else {},
                upstream_error=(
                    done.upstream_error.code if done.upstream_error is not None else None
                ),
                read_back=done.read_back,
                receipt=receipt,
            )
        if self.on_called is not None:
            self.on_called(tool, "success" if error is None else error.code)
        return error


async def record_tool_call(
    session: AsyncSession,
    agent: Agent,
    tool: str,
    body: ToolCallIn,
    error: PlatformError | None,
    **details: Any,
) -> None:
    """Audit a tool call (`tool.called`, in the caller's transaction): the agent, the
    action and the task's step it was called for, a failure with the code of `error` when
    it ends in one, and `details` beside those."""
    await record(
        session,
        actor=f"agent:{agent.agent_id}",
        action="tool.called",
        target=f"tool:{tool}.{body.action}",
        org_id=uuid.UUID(agent.org_id),
        outcome="success" if error is None else "failure",
        details={
            "tool": tool,
            "action": body.action,
            "task": body.task,
            "step": body.step,
            "error": error.code if error is not None else None,
            **details,
        },
    )


def _upstream(call: Authorised, action: str) -> dict[str, Any]:
    """The upstream call's span attributes: the integration and action, never a value."""
    return {
        "humanwork.tool.integration": call.adapter.integration_type,
        "humanwork.tool.action": action,
    }


def _summary(result: dict[str, Any]) -> dict[str, Any]:
    """What the audit log keeps of a result: its shape, not its data."""
    return {
        key: (len(value) if isinstance(value, list) else type(value).__name__)
        for key, value in list(result.items())[:20]
    }


def _secret_values(credentials: dict[str, Any]) -> list[str]:
    return [
        str(v)
        for k, v in credentials.items()
        if k not in NOT_SECRET and isinstance(v, str) and len(v) >= 4
    ]


TOOLS: Slot[ToolProxy] = Slot("tools")
Tools = Annotated[ToolProxy, Depends(TOOLS)]
"""The tool proxy (built once, with the sessions, cipher, clients and its ledger)."""

OrgToolCall = Callable[[Agent, str, ToolCallIn], Awaitable[ToolCallOut]]
"""Runs an agent's call of a tool of one of its org's MCP servers (agent, step tool
`mcp_<server>`, body) -> result; `mcp_servers.proxy.McpProxy.call_step_tool`."""

ORG_MCP: Slot[OrgToolCall | None] = Slot("org_mcp")
OrgMcp = Annotated[OrgToolCall | None, Depends(ORG_MCP)]
"""Calls of the org's own MCP servers' tools through `POST /v1/agent-api/tools/mcp_<server>`."""
