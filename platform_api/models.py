"""SQLAlchemy 2 ORM models of the platform's tables (one metadata, one module).

The schema itself is owned by the Alembic migrations in `platform_api/migrations`; a
test checks that these models and the migrated schema agree.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware timestamp that reads back as UTC on every backend (SQLite keeps
    no zone, so values are stored as naive UTC there)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        if dialect.name == "sqlite":
            return value.astimezone(UTC).replace(tzinfo=None)
        return value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


def utcnow() -> datetime:
    """The current time, timezone-aware UTC, to the microsecond."""
    return datetime.now(UTC)


class Base(DeclarativeBase):
    """Declarative base with the project's constraint naming convention."""

    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        datetime: DateTime(timezone=True),
        dict[str, Any]: JSON,
    }


class Org(Base):
    """A client organisation; its agents live in the Kubernetes namespace `namespace`."""

    __tablename__ = "orgs"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    slug: Mapped[str] = mapped_column(String(40), unique=True)
    name: Mapped[str] = mapped_column(String(200))
    namespace: Mapped[str] = mapped_column(String(63), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    approval_policy: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    """The org's `OrgPolicy` (wire form); null for the strict default."""
    # deactivation (migration 0010_org_deactivation)
    deactivated_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    """When the org was deactivated; null while it is active."""
    deactivated_by: Mapped[str | None] = mapped_column(String(100), nullable=True)
    suspended_agents: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON, nullable=True)
    """The AgentInstances (name and spec) deleted by the deactivation, restored on
    reactivation."""
    clients_share_conversations: Mapped[bool] = mapped_column(Boolean, default=False)
    """The org's clients see each other's conversations (default: only their own)."""
    client_confirm_risks: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    """Risks the initiating client must confirm (null: high and critical; []: none)."""
    reply_auto_send: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    """The admin's rule under which a reply to a client skips review (null: never)."""


class User(Base):
    """A human. What it may do in an org comes from its membership's role there (the access
    map's lookup key); platform-wide settings need `platform_admin`, which no membership
    grants. `role` is the role the user was created with (kept as a record and the
    default of new memberships; never read for a capability). A deactivated user's tokens
    are refused. An OIDC token stands for the user bound to its issuer and `sub` (both set
    or neither), never for one named by an editable claim."""

    __tablename__ = "users"
    __table_args__ = (UniqueConstraint("oidc_issuer", "oidc_subject", name="uq_users_oidc_issuer"),)

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    username: Mapped[str] = mapped_column(String(100), unique=True)
    password_hash: Mapped[str | None] = mapped_column(String(300))
    role: Mapped[str] = mapped_column(String(50))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    oidc_issuer: Mapped[str | None] = mapped_column(String(300))
    oidc_subject: Mapped[str | None] = mapped_column(String(255))
    # two levels of administration (migration 0013_admins)
    platform_admin: Mapped[bool] = mapped_column(Boolean, default=False)
    """May change platform-wide settings (the access map, orgs, platform admins)."""
    deactivated_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    """When the user was deactivated (its tokens refused); null while it is active."""


class Membership(Base):
    """A user belongs to an org with a role there (the access map's key for that org);
    every query is scoped to the caller's memberships."""

    __tablename__ = "memberships"

    user_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    org_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("orgs.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    role: Mapped[str] = mapped_column(String(50))


class AccessGrant(Base):
    """One row of the access map: `role` holds `capability`."""

    __tablename__ = "access_map"

    role: Mapped[str] = mapped_column(String(50), primary_key=True)
    capability: Mapped[str] = mapped_column(String(100), primary_key=True)


class AuditRecord(Base):
    """One append-only audit row, hash-chained within its `chain` (an org id or `platform`)."""

    __tablename__ = "audit_log"
    __table_args__ = (UniqueConstraint("chain", "seq", name="uq_audit_log_chain_seq"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    chain: Mapped[str] = mapped_column(String(64))
    seq: Mapped[int] = mapped_column(Integer)
    org_id: Mapped[uuid.UUID | None] = mapped_column(index=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    actor: Mapped[str] = mapped_column(String(200))
    action: Mapped[str] = mapped_column(String(100), index=True)
    target: Mapped[str] = mapped_column(String(300))
    outcome: Mapped[str] = mapped_column(String(20))
    details: Mapped[dict[str, Any]] = mapped_column(JSON)
    prev_hash: Mapped[str] = mapped_column(String(64))
    hash: Mapped[str] = mapped_column(String(64))


class AuditChainHead(Base):
    """The last sequence number and hash of each audit chain (locked while appending)."""

    __tablename__ = "audit_chain_heads"

    chain: Mapped[str] = mapped_column(String(64), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer)
    hash: Mapped[str] = mapped_column(String(64))


class ToolPermission(Base):
    """Whether an org's agents may use a tool, with the tool's org-specific config."""

    __tablename__ = "tool_permissions"

    org_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("orgs.id", ondelete="CASCADE"), primary_key=True
    )
    tool: Mapped[str] = mapped_column(String(100), primary_key=True)
    enabled: Mapped[bool] = mapped_column(Boolean)
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_by: Mapped[str] = mapped_column(String(100))


class IntegrationCredential(Base):
    """An org's third-party credentials, AES-256-GCM encrypted; never returned."""

    __tablename__ = "integration_credentials"

    org_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("orgs.id", ondelete="CASCADE"), primary_key=True
    )
    type: Mapped[str] = mapped_column(String(50), primary_key=True)
    key_id: Mapped[str] = mapped_column(String(50))
    nonce: Mapped[bytes] = mapped_column(LargeBinary)
    ciphertext: Mapped[bytes] = mapped_column(LargeBinary)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_by: Mapped[str] = mapped_column(String(100))


class McpServer(Base):
    """An org's remote MCP server (`platform_api.mcp_servers`): its URL and its auth
    (`Authorization` value) AES-256-GCM encrypted like integration credentials, bound to
    `mcp:<name>`; never returned. Its tools are `McpTool` rows."""

    __tablename__ = "mcp_servers"
    __table_args__ = (UniqueConstraint("org_id", "name"),)

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(30))
    url: Mapped[str] = mapped_column(String(2048))
    auth_key_id: Mapped[str | None] = mapped_column(String(50))
    auth_nonce: Mapped[bytes | None] = mapped_column(LargeBinary)
    auth_ciphertext: Mapped[bytes | None] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    created_by: Mapped[str] = mapped_column(String(100))
    refreshed_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class McpTool(Base):
    """One tool an org's MCP server listed: its definition as discovered (name,
    description, input schema) and that definition's hash, the server's annotations (shown,
    never trusted) and the risk the org's admin set (null: `high`)."""

    __tablename__ = "mcp_tools"

    server_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("mcp_servers.id", ondelete="CASCADE"), primary_key=True
    )
    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    definition: Mapped[dict[str, Any]] = mapped_column(JSON)
    definition_hash: Mapped[str] = mapped_column(String(80))
    annotations: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    risk: Mapped[str | None] = mapped_column(String(16))


class ArchivedTask(Base):
    """A finished AgenticTask (spec and final status) kept after the operator removes the
    resource: the long-term record of what was planned, decided and executed."""

    __tablename__ = "archived_tasks"

    uid: Mapped[str] = mapped_column(String(64), primary_key=True)
    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"), index=True)
    namespace: Mapped[str] = mapped_column(String(63))
    name: Mapped[str] = mapped_column(String(253))
    phase: Mapped[str] = mapped_column(String(30))
    requester: Mapped[str] = mapped_column(String(200))
    description: Mapped[str] = mapped_column(String(4000))
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    archived_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class ToolCall(Base):
    """One tool-proxy call, keyed by the org, the agent (`<namespace>/<name>`) and the
    idempotency key, so that one agent's keys never meet another's: a repeated key returns
    `result` without calling the upstream again. `state` is `started` while the upstream
    call runs, then `done`, `failed` (a definite refusal, replayed) or `unknown` (the call
    may have taken effect: kept until an expert resolves it)."""

    __tablename__ = "tool_calls"

    org_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("orgs.id", ondelete="CASCADE"), primary_key=True
    )
    agent_id: Mapped[str] = mapped_column(String(300), primary_key=True)
    idempotency_key: Mapped[str] = mapped_column(String(200), primary_key=True)
    tool: Mapped[str] = mapped_column(String(100))
    action: Mapped[str] = mapped_column(String(100))
    task: Mapped[str | None] = mapped_column(String(253))
    step: Mapped[str | None] = mapped_column(String(100))
    request_hash: Mapped[str] = mapped_column(String(64))
    state: Mapped[str] = mapped_column(String(20))
    status_code: Mapped[int] = mapped_column(Integer, default=0)
    result: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    receipt: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    """The signed receipt of the call (`humanwork_core.receipts`), once it is `done`; a
    replay answers this very receipt."""


class AgentEvent(Base):
    """One HMAC-verified agent event, deduplicated by the org, the signing agent and its
    idempotency key (one agent's keys never suppress another's events)."""

    __tablename__ = "agent_events"

    org_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("orgs.id", ondelete="CASCADE"), primary_key=True
    )
    agent_id: Mapped[str] = mapped_column(String(300), primary_key=True)
    idempotency_key: Mapped[str] = mapped_column(String(200), primary_key=True)
    event_type: Mapped[str] = mapped_column(String(50), index=True)
    task_id: Mapped[str | None] = mapped_column(String(253))
    step_id: Mapped[str | None] = mapped_column(String(100))
    occurred_at: Mapped[datetime] = mapped_column(UTCDateTime())
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    received_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class Conversation(Base):
    """A customer conversation an org's agent may read (never write) through its API."""

    __tablename__ = "conversations"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"), index=True)
    subject: Mapped[str] = mapped_column(String(300))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    created_by: Mapped[uuid.UUID | None] = mapped_column(nullable=True)
    """The user who started it (a client, usually); null when an admin created it."""


class ConversationParticipant(Base):
    """A user taking part in a conversation (what a client may see of its org)."""

    __tablename__ = "conversation_participants"

    conversation_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), primary_key=True
    )
    user_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    added_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class Message(Base):
    """One message of a conversation (`role`: customer, agent, expert or system). A
    client's message has `author_user_id`; an expert's internal note (`internal`) never
    reaches a client; a system message's `meta` says what it reports (task, step, state)."""

    __tablename__ = "messages"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    conversation_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), index=True
    )
    role: Mapped[str] = mapped_column(String(20))
    author: Mapped[str] = mapped_column(String(200))
    content: Mapped[str] = mapped_column(String(20000))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    author_user_id: Mapped[uuid.UUID | None] = mapped_column(nullable=True)
    internal: Mapped[bool] = mapped_column(Boolean, default=False)
    meta: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


class KnowledgeDocument(Base):
    """A document of an org's knowledge base, searched by `GET /v1/agent-api/context`."""

    __tablename__ = "knowledge_documents"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"), index=True)
    title: Mapped[str] = mapped_column(String(300))
    content: Mapped[str] = mapped_column(String(100000))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class LoginFailure(Base):
    """One failed sign-in, counted against its username (`scope` "username") and its client
    address ("client") by every replica alike; rows older than the window are deleted."""

    __tablename__ = "login_failures"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    scope: Mapped[str] = mapped_column(String(10))
    key: Mapped[str] = mapped_column(String(320))
    at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)

    __table_args__ = (Index("ix_login_failures_scope_key_at", "scope", "key", "at"),)


# --- the tools' per-org hourly rate, counted across replicas -------------------------------


class ToolCallCount(Base):
    """How many calls an org's agents made to a tool in one hour (the window's start); the
    proxy counts and refuses beyond the tool config's `ratePerHour` in one statement."""

    __tablename__ = "tool_call_counts"

    org_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("orgs.id", ondelete="CASCADE"), primary_key=True
    )
    tool: Mapped[str] = mapped_column(String(100), primary_key=True)
    window_start: Mapped[datetime] = mapped_column(UTCDateTime(), primary_key=True)
    count: Mapped[int] = mapped_column(Integer)


# --- notify: per-org webhooks, the event log, webhook deliveries --------------------------


class Webhook(Base):
    """An org's outgoing webhook: where its events are POSTed, signed with its secret
    (sealed with the credentials key when one is configured; `key_id` None: stored as is).
    """

    __tablename__ = "webhooks"

    org_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("orgs.id", ondelete="CASCADE"), primary_key=True
    )
    url: Mapped[str] = mapped_column(String(2048))
    events: Mapped[list[str]] = mapped_column(JSON)
    key_id: Mapped[str | None] = mapped_column(String(100))
    nonce: Mapped[bytes | None] = mapped_column(LargeBinary)
    secret: Mapped[bytes] = mapped_column(LargeBinary)
    updated_by: Mapped[str] = mapped_column(String(200))
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


# --- reply drafts and expert corrections ----------------------------------------------------


class ReplyDraft(Base):
    """A reply an agent drafted to a conversation's last client message (UC-1): sent at
    once above the confidence threshold, else waiting in the review queue (kind `reply`)
    until an expert approves, edits or rejects it."""

    __tablename__ = "reply_drafts"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"), index=True)
    conversation_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), index=True
    )
    agent: Mapped[str] = mapped_column(String(253))
    message_id: Mapped[int] = mapped_column(Integer)
    """The client message the draft answers."""
    client_message: Mapped[str] = mapped_column(String(20000))
    draft: Mapped[str] = mapped_column(String(32000))
    confidence: Mapped[float] = mapped_column()
    risk: Mapped[str] = mapped_column(String(20))
    flag_for_review: Mapped[bool] = mapped_column(Boolean)
    state: Mapped[str] = mapped_column(String(20), index=True)
    """`pending` (in the queue), `sent` or `rejected`."""
    requested_by: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    decided_by: Mapped[str | None] = mapped_column(String(200))
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    sent_text: Mapped[str | None] = mapped_column(String(32000))
    feedback: Mapped[str | None] = mapped_column(String(4096))
    sent_message_id: Mapped[int | None] = mapped_column(Integer)


class ExpertCorrection(Base):
    """An expert's correction, kept per org and pushed to its agents (UC-21, UC-23)."""

    __tablename__ = "corrections"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"), index=True)
    kind: Mapped[str] = mapped_column(String(30))
    """`reply_edit`, `reply_rejected`, `step_edit` or `step_rejected`."""
    message: Mapped[str] = mapped_column(String(32000))
    """The client message (a reply) or the request (a step's task)."""
    draft: Mapped[str | None] = mapped_column(String(32000))
    corrected: Mapped[str] = mapped_column(String(32000))
    """The text the expert sent instead, the edited parameters, or the feedback."""
    note: Mapped[str | None] = mapped_column(String(4096))
    source: Mapped[str] = mapped_column(String(400))
    """What was corrected: `reply:<id>` or `step:<namespace>/<task>/<step>`."""
    conversation_id: Mapped[uuid.UUID | None] = mapped_column()
    by: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class NotifyEvent(Base):
    """One event of an org (decision needed, escalated, completed, ...), once per stable
    `event_id`; `seq` orders the live stream (`Last-Event-ID`)."""

    __tablename__ = "notify_events"
    __table_args__ = (UniqueConstraint("org_id", "event_id"),)

    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"), index=True)
    event_id: Mapped[str] = mapped_column(String(300))
    event: Mapped[str] = mapped_column(String(50))
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, index=True)


class WebhookDelivery(Base):
    """One event to deliver to an org's webhook, with every attempt made (`attempts`:
    number, time, HTTP status or error); claimed by one replica at a time."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (UniqueConstraint("org_id", "event_id"),)

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"), index=True)
    event_id: Mapped[str] = mapped_column(String(300))
    event: Mapped[str] = mapped_column(String(50))
    body: Mapped[str] = mapped_column(String(100000))
    url: Mapped[str] = mapped_column(String(2048))
    state: Mapped[str] = mapped_column(String(20), index=True)
    attempt_count: Mapped[int] = mapped_column(Integer, default=0)
    attempts: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class PlanBinding(Base):
    """Who asked an agent for a plan (or for a revision of one), written in a committed
    transaction of its own BEFORE the agent is asked: keyed by the plan request's id, so
    the task the agent files for it has this requester whatever the agent writes, answers
    late, or fails. `task` is the task the platform bound it to (null: never bound)."""

    __tablename__ = "plan_bindings"
    __table_args__ = (Index("ix_plan_bindings_org_agent", "org_id", "agent", "created_at"),)

    request_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"))
    agent: Mapped[str] = mapped_column(String(253))
    requester: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(20))
    """`plan` or `revision`."""
    task: Mapped[str | None] = mapped_column(String(253))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class MessageDispatch(Base):
    """The one dispatch of a client message (keyed by the message): who claimed it and
    until when (`lease_until`), the mode it was classified in, and its outcome (the
    task filed or the reply drafted, or the error an expert was told about).
    `state`: `claimed`, `planned`, `drafted` or `failed`."""

    __tablename__ = "message_dispatches"

    message_id: Mapped[int] = mapped_column(
        ForeignKey("messages.id", ondelete="CASCADE"), primary_key=True
    )
    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"))
    conversation_id: Mapped[uuid.UUID] = mapped_column()
    mode: Mapped[str | None] = mapped_column(String(20))
    state: Mapped[str] = mapped_column(String(20), index=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    claimed_by: Mapped[str | None] = mapped_column(String(200))
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime())
    agent: Mapped[str | None] = mapped_column(String(253))
    task: Mapped[str | None] = mapped_column(String(253))
    reply_id: Mapped[uuid.UUID | None] = mapped_column()
    error: Mapped[str | None] = mapped_column(String(2000))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
