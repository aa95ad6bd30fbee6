"""`POST /v1/agent-events`: the events an agent pushes (seed 002 section 4.3), verified,
deduplicated and audited.

An event is authenticated by its HMAC signature alone (`X-Humanwork-Signature`, see
`humanwork_core.signing`): the body names the agent (`agent_id` = `<namespace>/<name>`),
the platform reads that AgentInstance, derives its callback secret from the installation's
master key (`humanwork_core.signing.derive_secret`; the operator wrote the same value into
the agent's Secret) and checks the MAC over the timestamp and the raw body, refusing
anything older or newer than five minutes. Then `org_id` must be the instance's org. The
event is stored once per `(org, agent, idempotency_key)` (the agent being the one whose
secret signed it, so one agent's keys never suppress another's events): a replay inside
the window is answered `duplicate: true` and audited no second time. A `config.applied`
event also records the hash the agent applied on its AgentInstance (annotation
`humanwork.io/config-applied`), which the operator turns into the `ConfigApplied`
condition.

A body is at most `MAX_EVENT_BYTES` (256 KiB): a larger one answers 413
`payload_too_large` before it is parsed, verified or stored, and is never read whole
(`read_bounded`: a `Content-Length` over the limit is refused before any byte is read, a
body that streams past it as soon as it does). JSON nested too deep for the parser is
422 `validation_failed`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from humanwork_core import keys, signing
from platform_api.deactivation.repository import deactivated_now
from platform_api.errors import (
    KubernetesUnavailable,
    PayloadTooLarge,
    SignatureRefused,
    ValidationFailed,
)
from platform_api.floor.audit.service import record
from platform_api.kube.client import KubeClient, KubeNotFound
from platform_api.kube.published import CallbackKey
from platform_api.models import AgentEvent, Org

CONFIG_APPLIED_ANNOTATION = keys.CONFIG_APPLIED
MAX_EVENT_BYTES = 256 * 1024


class EventType(StrEnum):
    """Every event type of seed 002 section 4.3, plus `config.applied` and
    `task.step_outcome_unknown` (a step's tool call may or may not have taken effect)."""

    PLAN_READY = "task.plan_ready"
    STEP_STARTED = "task.step_started"
    STEP_COMPLETED = "task.step_completed"
    STEP_FAILED = "task.step_failed"
    STEP_OUTCOME_UNKNOWN = "task.step_outcome_unknown"
    COMPLETED = "task.completed"
    NEEDS_INPUT = "task.needs_input"
    TOOL_CALLED = "tool.called"
    LLM_CALLED = "llm.called"
    ERROR = "error"
    CONFIG_APPLIED = "config.applied"


class AgentEventIn(BaseModel):
    """The signed body of an agent event."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "event_type": "task.step_completed",
                    "agent_id": "org-acme/acme-ecommerce",
                    "org_id": "3f2b8c1e-7d4a-4e9b-9c51-2a6f0d8e4b17",
                    "task_id": "reconcile-october",
                    "step_id": "2",
                    "timestamp": "2026-11-29T14:30:00Z",
                    "payload": {"summary": "1 inventory level set"},
                    "idempotency_key": "0b6f3f2e-5a7c-4d61-9a52-7c1f6f0e9d11",
                }
            ]
        },
    )

    event_type: EventType
    agent_id: str = Field(pattern=r"^[a-z0-9-]{1,63}/[a-z0-9.-]{1,253}$")
    org_id: uuid.UUID
    task_id: str | None = Field(default=None, max_length=253)
    step_id: str | None = Field(default=None, max_length=100)
    timestamp: datetime
    payload: dict[str, Any] = Field(default_factory=dict)
    idempotency_key: str = Field(min_length=1, max_length=200)

    @field_validator("step_id", mode="before")
    @classmethod
    def _step_as_text(cls, value: object) -> object:
        return str(value) if isinstance(value, int) else value


class EventAccepted(BaseModel):
    """How an event was received."""

    accepted: bool = Field(description="the event is stored (now or before)")
    duplicate: bool = Field(description="the idempotency key was seen before: not re-audited")
    idempotency_key: str


@dataclass(frozen=True)
class VerifiedAgent:
    """The AgentInstance a signed request came from."""

    namespace: str
    name: str
    org_id: str
    uid: str


async def read_bounded(
    headers: Mapping[str, str], stream: AsyncIterator[bytes], limit: int = MAX_EVENT_BYTES
) -> bytes:
    """The request body, or PayloadTooLarge as soon as it is known to exceed `limit`."""
    declared = headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge("the event is too large", limit=str(limit))
    chunks, size = [], 0
    async for chunk in stream:
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge("the event is too large", limit=str(limit))
        chunks.append(chunk)
    return b"".join(chunks)


def _claimed_agent(body: bytes) -> str:
    try:
        claimed = json.loads(body).get("agent_id")
    except (ValueError, AttributeError, RecursionError):
        claimed = None
    if not isinstance(claimed, str) or "/" not in claimed:
        raise ValidationFailed("the event must be a JSON object naming its agent_id")
    return claimed


async def verify_signed(
    kube: KubeClient | None,
    callback_key: CallbackKey,
    agent_id: str,
    body: bytes,
    header: str | None,
    now: datetime,
) -> VerifiedAgent:
    """The AgentInstance `agent_id` whose callback secret signed `body`, or
    SignatureRefused (401) with the reason in details (signature_missing, _malformed,
    _mismatch, _expired, or unknown_agent)."""
    if kube is None:
        raise KubernetesUnavailable("agent events need the Kubernetes API")
    namespace, _, name = agent_id.partition("/")
    try:  # a missing or malformed header fails before any lookup
        signing.parse_header(header)
    except signing.SignatureError as exc:
        raise SignatureRefused("the signature was refused", reason=exc.code) from None
    try:
        instance = await kube.get_agent_instance(namespace, name)
    except KubeNotFound:
        raise SignatureRefused("the signature was refused", reason="unknown_agent") from None
    uid = str(instance["metadata"].get("uid", ""))
    org_id = str((instance.get("spec") or {}).get("orgId", ""))
    for refresh in (False, True):
        master = await callback_key.get(kube, refresh=refresh)
        if master is None:
            raise SignatureRefused("the signature was refused", reason="no_callback_key")
        secret = signing.derive_secret(master, namespace, name, uid)
        try:
            signing.verify(secret, header, body, now)
        except signing.SignatureMismatch:
            if refresh:
                raise SignatureRefused(
                    "the signature was refused", reason=signing.SignatureMismatch.code
                ) from None
            continue
        except signing.SignatureError as exc:
            raise SignatureRefused("the signature was refused", reason=exc.code) from None
        return VerifiedAgent(namespace=namespace, name=name, org_id=org_id, uid=uid)
    raise AssertionError("unreachable")


async def receive(
    sessions: async_sessionmaker[AsyncSession],
    kube: KubeClient | None,
    callback_key: CallbackKey,
    body: bytes,
    header: str | None,
    now: datetime | None = None,
) -> EventAccepted:
    """Verify, store once and audit one event."""
    now = now or datetime.now(UTC)
    if len(body) > MAX_EVENT_BYTES:
        raise PayloadTooLarge("the event is too large", limit=str(MAX_EVENT_BYTES))
    agent = await verify_signed(kube, callback_key, _claimed_agent(body), body, header, now)
    try:
        event = AgentEventIn.model_validate_json(body)
    except ValidationError as exc:
        raise ValidationFailed(
            "the event is malformed", errors=json.dumps(exc.errors(include_url=False), default=str)
        ) from None
    if str(event.org_id) != agent.org_id:
        raise SignatureRefused("the event names another org", reason="wrong_org")
    if await deactivated_now(sessions, event.org_id):
        raise SignatureRefused("the org is deactivated", reason="org_deactivated")
    duplicate = not await _store(sessions, agent, event, now)
    if event.event_type is EventType.CONFIG_APPLIED and not duplicate and kube is not None:
        applied = event.payload.get("configHash")
        if isinstance(applied, str) and applied:
            await kube.annotate_agent_instance(
                agent.namespace, agent.name, {CONFIG_APPLIED_ANNOTATION: applied}
            )
    return EventAccepted(accepted=True, duplicate=duplicate, idempotency_key=event.idempotency_key)


async def _store(
    sessions: async_sessionmaker[AsyncSession],
    agent: VerifiedAgent,
    event: AgentEventIn,
    now: datetime,
) -> bool:
    """Store and audit the event; False when its idempotency key was seen before."""
    async with sessions() as session:
        try:
            async with session.begin():
                if await session.get(Org, event.org_id) is None:
                    raise ValidationFailed("the event's org is not registered with the platform")
                session.add(
                    AgentEvent(
                        org_id=event.org_id,
                        idempotency_key=event.idempotency_key,
                        agent_id=event.agent_id,
                        event_type=event.event_type.value,
                        task_id=event.task_id,
                        step_id=event.step_id,
                        occurred_at=event.timestamp,
                        payload=event.payload,
                        received_at=now,
                    )
                )
                await session.flush()
                await record(
                    session,
                    actor=f"agent:{event.agent_id}",
                    action=f"agent.{event.event_type.value}",
                    target=f"task:{agent.namespace}/{event.task_id}"
                    if event.task_id
                    else f"agent:{event.agent_id}",
                    org_id=event.org_id,
                    details={
                        "idempotency_key": event.idempotency_key,
                        "step_id": event.step_id,
                        "occurred_at": event.timestamp.isoformat(),
                        "payload": event.payload,
                    },
                )
        except IntegrityError:
            return False
    return True
