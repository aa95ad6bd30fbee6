"""The notification tables: the event log (each event once per org and event id), an
org's webhook, and its deliveries (claimed with `FOR UPDATE SKIP LOCKED`, so several
replicas never send the same attempt twice at once)."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import bindparam, delete, func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.models import (
    Conversation,
    Message,
    NotifyEvent,
    Org,
    ToolCall,
    Webhook,
    WebhookDelivery,
)


def _insert(session: AsyncSession) -> Any:
    dialect = session.bind.dialect.name if session.bind else "postgresql"
    return pg_insert if dialect == "postgresql" else sqlite_insert


def _event_insert(insert: Any) -> Any:
    """The event log's insert, in Core with its values bound at execution: built once per
    dialect (the notifier logs every event of every task the watch sees)."""
    table = NotifyEvent.__table__
    columns = ("org_id", "event_id", "event", "payload", "created_at")
    values = {name: bindparam(name, type_=table.c[name].type) for name in columns}
    return (
        insert(table)
        .values(values)
        .on_conflict_do_nothing(index_elements=["org_id", "event_id"])
        .returning(table.c.seq)
    )


_ADD_EVENT = {"postgresql": _event_insert(pg_insert), "sqlite": _event_insert(sqlite_insert)}


def _events_insert(insert: Any) -> Any:
    """The event log's insert of many events in one statement (SQLAlchemy's
    "insertmanyvalues"), answering the keys of those it logged: built once per dialect."""
    table = NotifyEvent.__table__
    return (
        insert(table)
        .on_conflict_do_nothing(index_elements=["org_id", "event_id"])
        .returning(table.c.org_id, table.c.event_id)
    )


_ADD_EVENTS = {"postgresql": _events_insert(pg_insert), "sqlite": _events_insert(sqlite_insert)}


class EventRepository:
    """The org's event log (the live stream reads it) and the deliveries it causes."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add(
        self, org_id: uuid.UUID, event_id: str, event: str, payload: dict[str, Any], at: datetime
    ) -> bool:
        """Log the event unless it is logged already; whether it was new."""
        dialect = self.session.bind.dialect.name if self.session.bind else "postgresql"
        values = {"org_id": org_id, "event_id": event_id, "event": event, "payload": payload}
        found = await self.session.execute(_ADD_EVENT[dialect], {**values, "created_at": at})
        return found.scalar_one_or_none() is not None

    async def add_many(self, rows: list[dict[str, Any]]) -> set[tuple[uuid.UUID, str]]:
        """Log each event of `rows` (`org_id`, `event_id`, `event`, `payload`,
        `created_at`) unless it is logged already, in one statement; the (org, event id)
        of those that were new."""
        if not rows:
            return set()
        dialect = self.session.bind.dialect.name if self.session.bind else "postgresql"
        found = await self.session.execute(_ADD_EVENTS[dialect], rows)
        return {(org_id, event_id) for org_id, event_id in found.all()}

    async def since(
        self, org_ids: Collection[uuid.UUID], after: int, limit: int
    ) -> Sequence[NotifyEvent]:
        """The events of `org_ids` logged after `after` (by seq), oldest first."""
        if not org_ids:
            return []
        query = (
            select(NotifyEvent)
            .where(NotifyEvent.seq > after, NotifyEvent.org_id.in_(list(org_ids)))
            .order_by(NotifyEvent.seq)
            .limit(limit)
        )
        return (await self.session.scalars(query)).all()

    async def last_seq(self) -> int:
        """The seq of the newest event (0 when there is none)."""
        return int((await self.session.scalar(select(func.max(NotifyEvent.seq)))) or 0)

    async def prune(self, before: datetime) -> None:
        """Drop events logged before `before` from the live stream's log."""
        await self.session.execute(delete(NotifyEvent).where(NotifyEvent.created_at < before))

    async def receipt(self, org_id: uuid.UUID, agent_id: str, key: str) -> dict[str, Any] | None:
        """The signed receipt kept with the org's ledger row of agent `agent_id` and `key`
        (an approved step's call, `humanwork_core.receipts.ledger_key`), if any."""
        row = await self.session.get(ToolCall, (org_id, agent_id, key))
        return dict(row.receipt) if row is not None and row.receipt else None

    async def org_namespace(self, org_id: uuid.UUID) -> str | None:
        """The namespace of the org (None for an unknown org)."""
        org = await self.session.get(Org, org_id)
        return org.namespace if org is not None else None

    async def tell_conversation(
        self,
        conversation_id: uuid.UUID,
        org_id: uuid.UUID,
        text: str,
        meta: dict[str, Any] | None = None,
    ) -> None:
        """Append a platform message (`meta`: what it reports) to the org's conversation
        (none for another org's)."""
        conversation = await self.session.get(Conversation, conversation_id)
        if conversation is not None and conversation.org_id == org_id:
            self.session.add(
                Message(
                    conversation_id=conversation_id,
                    role="system",
                    author="platform",
                    content=text,
                    meta=meta,
                )
            )


class WebhookRepository:
    """An org's webhook and its deliveries."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def get(self, org_id: uuid.UUID) -> Webhook | None:
        return await self.session.get(Webhook, org_id)

    async def put(self, hook: Webhook) -> Webhook:
        merged = await self.session.merge(hook)
        await self.session.flush()
        return merged

    async def remove(self, org_id: uuid.UUID) -> bool:
        hook = await self.get(org_id)
        if hook is None:
            return False
        await self.session.delete(hook)
        await self.session.execute(
            delete(WebhookDelivery).where(
                WebhookDelivery.org_id == org_id, WebhookDelivery.state == "pending"
            )
        )
        return True

    async def enqueue(
        self, org_id: uuid.UUID, event_id: str, event: str, body: str, url: str, at: datetime
    ) -> None:
        """A delivery of `body` due now (once per event id)."""
        statement = (
            _insert(self.session)(WebhookDelivery)
            .values(
                id=uuid.uuid4(),
                org_id=org_id,
                event_id=event_id,
                event=event,
                body=body,
                url=url,
                state="pending",
                attempt_count=0,
                attempts=[],
                next_attempt_at=at,
                created_at=at,
            )
            .on_conflict_do_nothing(index_elements=["org_id", "event_id"])
        )
        await self.session.execute(statement)

    async def claim(self, now: datetime, lease: timedelta, limit: int) -> list[WebhookDelivery]:
        """Deliveries due at `now`, locked against the other replicas, their next attempt
        moved `lease` ahead so that none takes them while this one sends."""
        query = (
            select(WebhookDelivery)
            .where(WebhookDelivery.state == "pending", WebhookDelivery.next_attempt_at <= now)
            .order_by(WebhookDelivery.next_attempt_at)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        claimed = list((await self.session.scalars(query)).all())
        for delivery in claimed:
            delivery.next_attempt_at = now + lease
        return claimed

    async def delivery(self, delivery_id: uuid.UUID) -> WebhookDelivery | None:
        return await self.session.get(WebhookDelivery, delivery_id)

    async def deliveries(
        self, org_id: uuid.UUID, offset: int, limit: int
    ) -> tuple[int, Sequence[WebhookDelivery]]:
        """The org's deliveries, newest first, and how many there are."""
        where = WebhookDelivery.org_id == org_id
        total = await self.session.scalar(
            select(func.count()).select_from(WebhookDelivery).where(where)
        )
        query = (
            select(WebhookDelivery)
            .where(where)
            .order_by(WebhookDelivery.created_at.desc(), WebhookDelivery.event_id)
            .offset(offset)
            .limit(limit)
        )
        return int(total or 0), (await self.session.scalars(query)).all()
