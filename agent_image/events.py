"""Agent -> platform events (seed 002 section 4.3): `POST {callback_url}`, signed.

The body is the JSON object `{event_type, agent_id, org_id, task_id, step_id, timestamp,
payload, idempotency_key}`; the request carries `X-Humanwork-Signature`
(:func:`humanwork_core.signing.sign` with the instance's callback secret over the raw
body and the send time, re-read from its mounted file at every send so a rotated secret
is used at once), `Idempotency-Key` (the event's key, the same on every retry, so the
platform audits a retried event once) and the agent token as bearer.

Delivery never raises into the caller: connection errors, timeouts, 5xx, 429 (and 401 or
403, which a rotated token or secret can cure) are retried with backoff; an event still
undelivered goes to a bounded in-memory outbox that :meth:`EventSender.run` retries in
the background, oldest first (the oldest are dropped, and logged, when it is full). Other
4xx answers mean the platform will never take the event: it is logged and dropped. While
the outbox holds events, new ones queue behind them, so the platform sees events in the
order they happened.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

from agent_image.settings import AgentSettings
from humanwork_core import signing, tracing

LOG = logging.getLogger("humanwork.agent.events")

EVENT_TYPES = frozenset(
    {
        "task.plan_ready",
        "task.step_started",
        "task.step_completed",
        "task.step_failed",
        "task.step_outcome_unknown",
        "task.completed",
        "task.needs_input",
        "tool.called",
        "llm.called",
        "error",
        "config.applied",
    }
)
"""Every event type the agent sends."""

_RETRY_LATER = frozenset({401, 403, 408, 425, 429})


def rfc3339(moment: datetime) -> str:
    """`2026-05-04T14:30:00Z` (UTC, seconds)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class _Pending:
    key: str
    event_type: str
    body: bytes
    trace: dict[str, str] = field(default_factory=dict)
    """The span current when it was emitted (`traceparent`), sent with it."""


class EventSender:
    """Signs and delivers events; see the module's description."""

    def __init__(
        self,
        settings: AgentSettings,
        client: httpx.AsyncClient,
        *,
        attempts: int = 3,
        backoff: float = 0.2,
        max_outbox: int = 1000,
        timeout: float = 10.0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.settings = settings
        self.client = client
        self.attempts = max(1, attempts)
        self.backoff = backoff
        self.timeout = timeout
        self.clock = clock
        self._outbox: deque[_Pending] = deque()
        self.max_outbox = max_outbox
        self._lock = asyncio.Lock()
        self.delivered = 0
        self.dropped = 0

    @property
    def outbox_size(self) -> int:
        return len(self._outbox)

    def build(
        self,
        event_type: str,
        *,
        task_id: str | None = None,
        step_id: str | None = None,
        payload: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """The event's JSON body."""
        if event_type not in EVENT_TYPES:
            raise ValueError(f"unknown event type {event_type!r}")
        return {
            "event_type": event_type,
            "agent_id": self.settings.agent_id,
            "org_id": self.settings.org_id,
            "task_id": task_id,
            "step_id": step_id,
            "timestamp": rfc3339(self.clock()),
            "payload": dict(payload or {}),
            "idempotency_key": idempotency_key or str(uuid.uuid4()),
        }

    async def emit(
        self,
        event_type: str,
        *,
        task_id: str | None = None,
        step_id: str | None = None,
        payload: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> None:
        """Send one event (see the module's description); never raises."""
        try:
            event = self.build(
                event_type,
                task_id=task_id,
                step_id=step_id,
                payload=payload,
                idempotency_key=idempotency_key,
            )
            body = json.dumps(event, separators=(",", ":"), default=str).encode("utf-8")
        except (TypeError, ValueError) as exc:
            LOG.error("event %s not sent: %s", event_type, exc)
            return
        pending = _Pending(event["idempotency_key"], event_type, body, tracing.headers())
        async with self._lock:
            if self._outbox:
                self._queue(pending)
                await self._flush_locked()
                return
            outcome = await self._deliver(pending, self.attempts)
            if outcome == "retry":
                self._queue(pending)

    def _queue(self, pending: _Pending) -> None:
        if len(self._outbox) >= self.max_outbox:
            lost = self._outbox.popleft()
            self.dropped += 1
            LOG.error("event outbox full: dropped %s %s", lost.event_type, lost.key)
        self._outbox.append(pending)

    async def flush(self) -> int:
        """Try the outbox once, oldest first, until one fails; how many were delivered."""
        async with self._lock:
            return await self._flush_locked()

    async def _flush_locked(self) -> int:
        sent = 0
        while self._outbox:
            outcome = await self._deliver(self._outbox[0], 1)
            if outcome == "retry":
                break
            self._outbox.popleft()
            sent += outcome == "sent"
        return sent

    async def run(self, interval: float = 5.0) -> None:
        """Retry the outbox every `interval` seconds, forever (a background job)."""
        while True:
            await asyncio.sleep(interval)
            if self._outbox:
                try:
                    await self.flush()
                except Exception:  # never let the loop die
                    LOG.exception("event outbox flush failed")

    def _headers(self, pending: _Pending) -> dict[str, str]:
        secret = self.settings.callback_secret_file.read_text(encoding="utf-8").strip()
        token = self.settings.token_file.read_text(encoding="utf-8").strip()
        return {
            "Content-Type": "application/json",
            signing.SIGNATURE_HEADER: signing.sign(secret, pending.body, self.clock()),
            signing.IDEMPOTENCY_HEADER: pending.key,
            "Authorization": f"Bearer {token}",
            **pending.trace,
        }

    async def _deliver(self, pending: _Pending, attempts: int) -> str:
        """`sent`, `dropped` (refused for good) or `retry` (keep it for later)."""
        for attempt in range(1, attempts + 1):
            reason: str
            try:
                response = await self.client.post(
                    self.settings.callback_url,
                    content=pending.body,
                    headers=self._headers(pending),
                    timeout=self.timeout,
                )
            except (OSError, ValueError) as exc:  # secret or token file unreadable
                reason = f"cannot sign: {exc}"
            except httpx.HTTPError as exc:
                reason = f"{type(exc).__name__}: {exc}"
            else:
                if response.status_code < 300:
                    self.delivered += 1
                    return "sent"
                if response.status_code < 500 and response.status_code not in _RETRY_LATER:
                    self.dropped += 1
                    LOG.error(
                        "event %s %s refused by the platform (%d): %s",
                        pending.event_type,
                        pending.key,
                        response.status_code,
                        response.text[:300],
                    )
                    return "dropped"
                reason = f"HTTP {response.status_code}"
            if attempt < attempts:
                await asyncio.sleep(self.backoff * (2 ** (attempt - 1)))
            else:
                LOG.warning(
                    "event %s %s not delivered (%s); kept for later",
                    pending.event_type,
                    pending.key,
                    reason,
                )
        return "retry"
