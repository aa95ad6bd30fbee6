"""The tool-call ledger: one row per (org, agent, idempotency key) in `tool_calls`, so that
one approval buys one side effect however often the agent calls.

- `claim` commits a `started` row before the upstream is called (two concurrent calls with
  one key cannot both reach it); a key claimed before answers through `replay`.
- `replay` answers a repeat from the row: the stored result, the stored refusal, 409
  `tool_call_in_progress` while the first call runs (with `details.staleInSeconds`, the
  lease it has left), 409 `tool_call_outcome_unknown` while its outcome is unknown, 422
  `idempotency_conflict` for a key reused for another request.
- The lease: a claim still `started` after `lease_seconds` (`tool_claim_lease_seconds`,
  longer than any live call) is the claim of a platform that died mid-call. The first
  repeat after that turns it `unknown` in the database (`turn_stale`), for an expert to
  decide: whether that call reached the upstream is unknown, so it is never called again
  blindly, and the agent, which waits out `in progress` for as long as the lease lasts,
  records the step `OutcomeUnknown` instead of failing it.
- `finish` ends the claim as `settle` says: `done`, `failed` (a definite refusal, replayed),
  `unknown` (kept for an expert, `human_tasks.resolve`), or `release` (deleted: nothing
  happened, a retry may call again).
"""

from __future__ import annotations

import hashlib
import math
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from humanwork_core import receipts, taskflow
from humanwork_core.resources import AgenticTask
from platform_api.agent_api.schemas import ToolCallIn, ToolCallOut
from platform_api.errors import (
    IdempotencyConflict,
    PlatformError,
    ToolCallInProgress,
    ToolCallOutcomeUnknown,
    Unavailable,
)
from platform_api.models import ToolCall
from platform_api.tools.upstreams.base import OUTCOME_NOT_SENT, OUTCOME_UNKNOWN
from platform_api.tools.upstreams.errors import MissingCredentials, UpstreamError

STALE_CLAIM_SECONDS = 300
"""The default lease of a `started` claim (`Settings.tool_claim_lease_seconds`)."""


class StoredRefusal(UpstreamError):
    """A refusal stored by an earlier call with the key, answered again (`details.replayed`,
    `details.upstreamCode`)."""

    def public_details(self) -> dict[str, Any]:
        return dict(self.details)


def step_key(task: AgenticTask, step_id: str) -> str:
    """The ledger key of an approved step's side effect (also sent upstream as the
    `Idempotency-Key`): one approval, one side effect, whatever key the agent sends."""
    return receipts.ledger_key(task.metadata.uid or task.metadata.name, step_id)


def request_hash(tool: str, body: ToolCallIn) -> str:
    """What identifies a request under one key: the tool, action, params, task and step."""
    payload = {
        "tool": tool,
        "action": body.action,
        "params": body.params,
        "task": body.task,
        "step": body.step,
    }
    return hashlib.sha256(taskflow.canonical_json(payload)).hexdigest()


def settle(error: PlatformError | None, side_effecting: bool) -> str:
    """What becomes of a claim after the call: `done`, `failed` (stored and replayed),
    `unknown` (kept for an expert) or `release` (deleted: a retry may call again).

    The adapters mark every error that follows a write with `outcome` (`unknown`,
    `refused` or `not_sent`); an error without one came before any write went out."""
    if error is None:
        return "done"
    if isinstance(error, MissingCredentials | Unavailable):
        return "release"  # failed before any request
    details = error.public_details()
    outcome = details.get("outcome")
    if side_effecting and outcome == OUTCOME_UNKNOWN:
        return "unknown"
    if side_effecting and details.get("partlyApplied"):
        return "failed"  # part of the action happened for sure: never again
    if outcome == OUTCOME_NOT_SENT or details.get("upstreamAnswered") == "429":
        return "release"  # nothing left, or rate-limited: nothing happened
    if outcome is None and error.status_code >= 500:
        return "release"  # a read (or the reads before a write) failed: nothing changed
    return "failed"


def outcome_unknown(row: ToolCall) -> ToolCallOutcomeUnknown:
    """The answer to every call of a step whose side effect may or may not have happened."""
    return ToolCallOutcomeUnknown(
        "an earlier call for this step reached the upstream and its outcome is unknown; "
        "an expert must resolve it",
        key=row.idempotency_key,
        task=row.task or "",
        step=row.step or "",
    )


@dataclass(frozen=True)
class Claim:
    """One call's entry in the ledger: whose key, for which request."""

    org_id: uuid.UUID
    agent_id: str
    key: str
    tool: str
    body: ToolCallIn
    request_hash: str

    @property
    def primary_key(self) -> tuple[uuid.UUID, str, str]:
        return (self.org_id, self.agent_id, self.key)


def claim_is_stale(row: ToolCall, now: datetime, lease_seconds: float) -> bool:
    """Whether `row` is a `started` claim past its lease (its platform died mid-call): the
    one rule the proxy, the queue's view and an expert's resolution all judge by."""
    age = (now - row.created_at).total_seconds()
    return row.state == "started" and age > lease_seconds


@dataclass(frozen=True)
class ToolCallLedger:
    """Claim, replay, finish and release tool calls (see the module docstring)."""

    sessions: async_sessionmaker[AsyncSession]
    lease_seconds: float = STALE_CLAIM_SECONDS

    async def claim(self, claim: Claim) -> ToolCallOut | None:
        """Claim the key (a row committed before the upstream is called); the stored
        answer (or its refusal) when the key was claimed before."""
        now = datetime.now(UTC)
        async with self.sessions() as session:
            try:
                async with session.begin():
                    session.add(_started(claim, now))
            except IntegrityError:
                async with session.begin():
                    existing = await session.get(ToolCall, claim.primary_key, with_for_update=True)
                    if existing is not None:
                        self.turn_stale(existing, now)
                if existing is None:  # released between our insert and our read
                    raise ToolCallInProgress(
                        "a call with this key is running", key=claim.key
                    ) from None
                return self.replay(existing, claim.request_hash, now)
        return None

    def replay(self, row: ToolCall, request_hash: str, now: datetime) -> ToolCallOut:
        """The stored answer of `row` to a repeat of its request."""
        if row.request_hash != request_hash:
            raise IdempotencyConflict(
                "this idempotency key was used for another call", key=row.idempotency_key
            )
        if row.state == "unknown" or self.stale(row, now):
            raise outcome_unknown(row)
        if row.state == "started":
            left = self.lease_seconds - (now - row.created_at).total_seconds()
            raise ToolCallInProgress(
                "a call with this key is running",
                key=row.idempotency_key,
                staleInSeconds=str(max(0, math.ceil(left))),
            )
        if row.state == "failed":
            error = row.result
            message = str(error.get("message", "the upstream refused the call"))
            upstream_code = str(error.get("code", ""))
            raise StoredRefusal(
                message, details={"replayed": "true", "upstreamCode": upstream_code}
            )
        return ToolCallOut(
            tool=row.tool,
            action=row.action,
            result=row.result,
            replayed=True,
            sideEffecting=True,
            receipt=row.receipt,
        )

    def stale(self, row: ToolCall, now: datetime) -> bool:
        """Whether `row` is a `started` claim past this ledger's lease."""
        return claim_is_stale(row, now, self.lease_seconds)

    def turn_stale(self, row: ToolCall, now: datetime) -> None:
        """Turn a stale claim `unknown` (in the caller's transaction, the row locked): from
        now on every view of it (the queue, `resolve`) sees an outcome an expert decides."""
        if not self.stale(row, now):
            return
        row.state = "unknown"
        row.status_code = ToolCallOutcomeUnknown.status_code
        row.result = {
            "code": ToolCallOutcomeUnknown.code,
            "message": "the call's claim outlived its lease: the platform that made it "
            "stopped mid-call",
        }
        row.finished_at = now

    async def finish(
        self,
        session: AsyncSession,
        claim: Claim,
        result: dict[str, Any],
        error: PlatformError | None,
        side_effecting: bool,
        receipt: dict[str, Any] | None = None,
    ) -> PlatformError | None:
        """End the claim as `settle` says, the row keeping the call's `receipt` (a replay
        answers it again; a refused or unknown call's receipt records the upstream's error
        answer); the error to answer (outcome unknown replaces the
        upstream's own error for a side effect that may have happened)."""
        row = await session.get(ToolCall, claim.primary_key, with_for_update=True)
        if row is None:
            return error
        verdict = settle(error, side_effecting)
        if verdict == "release":
            await self.release(session, row)
            return error
        row.state = verdict
        row.status_code = 200 if error is None else error.status_code
        row.result = result if error is None else error.body()
        row.finished_at = datetime.now(UTC)
        row.receipt = receipt
        return outcome_unknown(row) if verdict == "unknown" else error

    async def release(self, session: AsyncSession, row: ToolCall) -> None:
        """Delete the claim: a retry with the key may call the upstream again."""
        await session.delete(row)


def _started(claim: Claim, now: datetime) -> ToolCall:
    return ToolCall(
        org_id=claim.org_id,
        agent_id=claim.agent_id,
        idempotency_key=claim.key,
        tool=claim.tool,
        action=claim.body.action,
        task=claim.body.task,
        step=claim.body.step,
        request_hash=claim.request_hash,
        state="started",
        status_code=0,
        result={},
        created_at=now,
    )
