"""The platform API's settings, read from `HUMANWORK_*` environment variables and, under
`HUMANWORK_SECRETS_DIR`, from one file per setting (a mounted Secret: the file
`HUMANWORK_JWT_SECRET` holds the JWT secret; an environment variable wins over a file).

`Settings` is built once by `main` (or by a test) and handed to `create_app`; nothing
reads the environment at import time. Secrets are `SecretStr` so they never appear in
a repr or a log line.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SecretsSettingsSource,
    SettingsConfigDict,
)

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./humanwork-platform.db"


class _SecretFiles(PydanticBaseSettingsSource):
    """The files of the folder `secrets_dir` names (an argument or HUMANWORK_SECRETS_DIR),
    one per setting, named as its variable."""

    def __init__(
        self, settings_cls: type[BaseSettings], *given: PydanticBaseSettingsSource
    ) -> None:
        super().__init__(settings_cls)
        self.given = given

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # __call__ reads the folder as a whole

    def __call__(self) -> dict[str, Any]:
        folder = next((f for f in (s().get("secrets_dir") for s in self.given) if f), None)
        if not folder:
            return {}
        return SecretsSettingsSource(self.settings_cls, secrets_dir=folder)()


class Settings(BaseSettings):
    """Everything the platform API can be configured with."""

    model_config = SettingsConfigDict(
        env_prefix="HUMANWORK_", extra="ignore", hide_input_in_errors=True
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Arguments, then the environment, then the files of HUMANWORK_SECRETS_DIR."""
        return (
            init_settings,
            env_settings,
            _SecretFiles(settings_cls, init_settings, env_settings),
        )

    secrets_dir: Path | None = Field(
        default=None,
        description="a folder with one file per secret setting, named as its variable "
        "(`HUMANWORK_DATABASE_URL`, `HUMANWORK_JWT_SECRET`, ...): the platform's Secrets "
        "mounted as files instead of environment variables (the manifests mount them at "
        "/etc/humanwork/secrets); a variable of the same name wins over its file",
    )
    tls_cert_file: Path | None = Field(
        default=None,
        description="PEM certificate (chain) the API serves TLS with, with "
        "HUMANWORK_TLS_KEY_FILE; reloaded for new connections when the file changes (a "
        "renewed cert-manager Secret needs no restart). Unset: plain HTTP (local processes "
        "and tests only; every manifest sets it)",
    )
    tls_key_file: Path | None = Field(
        default=None, description="PEM private key of HUMANWORK_TLS_CERT_FILE"
    )

    database_url: str = Field(
        default=DEFAULT_DATABASE_URL,
        description="SQLAlchemy async URL: postgresql+asyncpg://... or sqlite+aiosqlite://...",
    )
    database_owner_url: SecretStr | None = Field(
        default=None,
        description="PostgreSQL: URL of the role that owns the schema. `humanwork-platform "
        "migrate` connects with it and grants the app role (the user of "
        "HUMANWORK_DATABASE_URL) what it may do: INSERT and SELECT on the audit log, never "
        "UPDATE, DELETE or TRUNCATE. Unset: migrations run as the app's own role, which then "
        "owns the audit tables (only the signed checkpoints detect a cut tail)",
    )
    database_pool_size: int = Field(
        default=20,
        ge=1,
        le=500,
        description="PostgreSQL connections each replica keeps open; a request holds one "
        "for its whole transaction, so about the requests in flight at once (each replica's "
        "pool size plus overflow, times the replicas, must stay under the server's "
        "max_connections)",
    )
    database_pool_overflow: int = Field(
        default=10,
        ge=0,
        le=500,
        description="connections opened beyond the pool in a burst and closed again after "
        "use (each open costs a connection handshake)",
    )
    migrate_on_startup: bool = Field(
        default=True, description="run the Alembic migrations at startup"
    )

    admin_password: SecretStr | None = Field(
        default=None, description="password of the first admin, user `admin`, created at startup"
    )

    jwt_secret: SecretStr | None = Field(
        default=None,
        min_length=32,
        description="HS256 key of the built-in token issuer; a random per-process key when unset",
    )
    jwt_issuer: str = "humanwork-platform"
    jwt_audience: str = "humanwork-platform"
    token_lifetime_seconds: int = Field(default=3600, gt=0, le=86400)

    oidc_jwks_url: str | None = Field(default=None, description="JWKS of an external OIDC issuer")
    oidc_issuer: str | None = None
    oidc_audience: str | None = None
    oidc_algorithms: list[str] = ["RS256", "ES256", "EdDSA"]

    login_max_failures: int = Field(
        default=5,
        ge=1,
        description="failed sign-ins of one username from one client address within "
        "`login_failure_window_seconds` before that pair backs off: its next attempt waits "
        "`login_backoff_seconds`, doubled after each further failure (429 login_throttled "
        "with Retry-After). The same user from another address is not held back by it",
    )
    login_max_failures_per_user: int = Field(
        default=50,
        ge=1,
        description="failed sign-ins of one username from all addresses within the window "
        "before it backs off too (the ceiling against guessing from many addresses); an "
        "address without a failure for that username lately is never held back by it",
    )
    login_max_failures_per_client: int = Field(
        default=100,
        ge=1,
        description="failed sign-ins from one client address (any username) within the window "
        "before that address backs off (the ceiling against spraying usernames)",
    )
    login_failure_window_seconds: int = Field(
        default=900, gt=0, le=86400, description="the window the failed sign-ins are counted in"
    )
    login_backoff_seconds: int = Field(
        default=30,
        gt=0,
        le=86400,
        description="the wait after a key (user and address, user, address) reached its "
        "limit; doubled after each further failure, at most the window",
    )
    password_hash_workers: int = Field(
        default=2,
        ge=1,
        le=64,
        description="threads that verify passwords (scrypt, 32 MiB and about 0.1 s each): "
        "sign-ins beyond them wait for a thread, never holding a database connection, and "
        "the event loop keeps serving the rest of the API",
    )
    trusted_proxies: list[str] = Field(
        default_factory=list,
        description="JSON list of CIDRs of the reverse proxies (ingress controller, load "
        "balancer) whose `X-Forwarded-For` is believed: the client address is the "
        "right-most hop not in these ranges, read from the right through trusted hops only. "
        "Empty (the default): the socket peer is the client and `X-Forwarded-For` is ignored",
    )

    access_map: dict[str, list[str]] | None = Field(
        default=None,
        description="JSON role -> capabilities; replaces the stored capabilities of those roles",
    )

    credentials_keys: dict[str, SecretStr] = Field(
        default_factory=dict,
        description="JSON key id -> base64 AES-256 key for integration credentials",
    )
    credentials_active_key: str | None = Field(
        default=None, description="the key id new integration credentials are encrypted with"
    )

    agent_endpoints: dict[str, str] = Field(
        default_factory=dict,
        description="JSON `<namespace>/<name>` -> base URL of an agent, overriding its "
        "AgentInstance's status.endpoint (for agents run as local processes in development)",
    )
    agent_endpoints_file: Path | None = Field(
        default=None,
        description="a JSON file of the same mapping, read on every command (development: "
        "the local harness writes it as it starts agent processes)",
    )
    agent_timeout_seconds: float = Field(
        default=60.0, gt=0, description="timeout of the platform's signed commands to agents"
    )
    # the router: an optional LLM for requests the keywords leave open
    router_llm_base_url: str | None = Field(
        default=None,
        description="base URL of an OpenAI-compatible API (…/v1) the router asks to choose an "
        "agent when the specialists' keywords do not decide; unset: keywords only",
    )
    router_llm_model: str = Field(default="openai/gpt-4o-mini", description="model the router asks")
    router_llm_api_key: SecretStr | None = Field(
        default=None, description="bearer key of the router's LLM API"
    )
    router_llm_timeout_seconds: float = Field(
        default=10.0, gt=0, description="timeout of the router's LLM call"
    )
    upstream_timeout_seconds: float = Field(
        default=10.0, gt=0, description="timeout of the tool proxy's calls to upstream APIs"
    )
    tool_claim_lease_seconds: float = Field(
        default=300.0,
        ge=10,
        le=86_400,
        description="how long a tool call's claim in the proxy's ledger may stay `started` "
        "before it is taken for the claim of a platform that died mid-call: the next call "
        "with its key turns it `unknown` (an expert decides) instead of answering "
        "`tool_call_in_progress`. At least 4 times HUMANWORK_UPSTREAM_TIMEOUT_SECONDS (a live "
        "call's reads, write and read-back)",
    )
    upstream_allowed_endpoints: list[str] = Field(
        default_factory=list,
        description="JSON list of `host:port` pairs and CIDRs the tool proxy may reach "
        "although they are not on an integration type's host allowlist or not public "
        "(loopback, private, link-local, cluster addresses), over plain http too. For local "
        'fakes in development and tests only (e.g. `["127.0.0.1/32"]`); leave it empty in '
        "production. Integration URLs are otherwise https to the type's allowed hosts "
        "(`*.myshopify.com`; the Amazon SP-API regional hosts and `api.amazon.com`), never "
        "with userinfo or a fragment, and every resolved address must be public",
    )
    # the read-only web.fetch tool
    web_fetch_max_bytes: int = Field(
        default=1_048_576,
        ge=1024,
        le=50_000_000,
        description="the most bytes `web.fetch` reads of a page; a larger answer is refused "
        "(`web_fetch_refused`, reason `too_large`)",
    )
    web_fetch_timeout_seconds: float = Field(
        default=10.0,
        gt=0,
        le=120,
        description="the most time one `web.fetch` call takes, redirects included",
    )
    agent_token_audience: str = Field(
        default="humanwork-platform", description="the `aud` agent tokens must carry"
    )
    kubeconfig: str | None = Field(
        default=None,
        description="kubeconfig file of the platform's Kubernetes identity (its current "
        "context, with a bearer token or a client certificate; exec plugins are not read); "
        "unset: no Kubernetes (the task endpoints answer 503 kubernetes_unavailable)",
    )
    kube_in_cluster: bool = Field(
        default=False,
        description="use the pod's ServiceAccount (in-cluster configuration) when no "
        "kubeconfig is given",
    )
    kube_connections: int = Field(
        default=64, ge=1, le=1000, description="connections to the Kubernetes API at most"
    )
    decision_retries: int = Field(
        default=3,
        ge=0,
        le=20,
        description="how often a decision is re-read and re-checked when another writer "
        "changed the task between read and write",
    )

    queue_near_deadline_seconds: int = Field(
        default=600,
        ge=0,
        description="a queued decision due within this many seconds is flagged near_deadline",
    )

    audit_checkpoint_dir: Path | None = Field(
        default=None,
        description="directory of the signed audit checkpoints, outside the database (a "
        "volume in Kubernetes); `humanwork-platform audit-checkpoint` writes there and "
        "`audit-verify` compares every chain with its latest valid checkpoint. Unset: no "
        "checkpoints, and a tail cut together with its chain head goes unnoticed",
    )
    audit_checkpoint_key_file: Path | None = Field(
        default=None,
        description="PKCS#8 PEM Ed25519 private key that signs the audit checkpoints (a "
        "mounted Secret no database role can read); its public half also verifies them",
    )
    audit_checkpoint_verify_keys_file: Path | None = Field(
        default=None,
        description="JWK set (JSON) of further keys checkpoints may be signed with: retired "
        "signing keys, or all of them where `audit-verify` runs without the private key; a "
        "missing file adds no key",
    )
    audit_checkpoint_keep: int = Field(
        default=50, ge=1, description="signed checkpoints kept per chain (older ones pruned)"
    )

    receipt_key_file: Path | None = Field(
        default=None,
        description="PKCS#8 PEM Ed25519 private key that signs the tool proxy's receipts (a "
        "mounted Secret no database role can read). Unset: calls get no receipt",
    )
    receipt_verify_keys_file: Path | None = Field(
        default=None,
        description="JWK set (JSON) of retired receipt keys, published with the current one "
        "at `GET /v1/receipt-keys` so that their receipts still verify; a missing file adds "
        "no key",
    )

    metrics_port: int = Field(
        default=0,
        ge=0,
        le=65535,
        description="port of the Prometheus `/metrics` endpoint, apart from the API's own "
        "port (which the experts' Ingress reaches); 0 turns it off",
    )
    metrics_address: str = Field(
        default="0.0.0.0", description="address the `/metrics` endpoint binds"
    )

    # --- the dispatch of clients' messages ------------------------------------------
    dispatch_interval_seconds: float = Field(
        default=1.0,
        gt=0,
        le=60,
        description="how often each replica looks for client messages to dispatch",
    )
    dispatch_batch: int = Field(
        default=8, ge=1, le=100, description="client messages one replica dispatches at once"
    )
    dispatch_timeout_seconds: float = Field(
        default=120.0,
        gt=0,
        description="time the org's agent has to answer a client message (classify, and "
        "draft or plan); past it the dispatch fails and an expert is told",
    )
    dispatch_lease_seconds: float = Field(
        default=300.0,
        gt=0,
        description="how long a replica's claim on a client message holds; a claim whose "
        "replica died is taken over after it (longer than the dispatch timeout)",
    )

    # --- notify: webhooks and the live event stream ---------------------------------------
    webhook_max_attempts: int = Field(
        default=8, ge=1, le=50, description="attempts per webhook delivery before it is failed"
    )
    webhook_backoff_seconds: float = Field(
        default=5.0,
        gt=0,
        description="wait before a webhook delivery's second attempt; doubled after each "
        "failure (exponential backoff), at most an hour",
    )
    webhook_timeout_seconds: float = Field(
        default=10.0, gt=0, description="time a webhook receiver has to answer"
    )
    notify_interval_seconds: float = Field(
        default=2.0,
        gt=0,
        description="how often the platform looks for webhook deliveries due and decisions "
        "near their deadline (HUMANWORK_QUEUE_NEAR_DEADLINE_SECONDS); a delivery queued on "
        "this replica is claimed at once",
    )
    heap_trim_seconds: float = Field(
        default=60.0,
        ge=0,
        description="how often the platform gives the memory its C allocator holds free "
        "back to the system (malloc_trim; 0: never): without it the resident memory of a "
        "busy platform climbs while what it holds stays flat",
    )
    notify_retention_seconds: int = Field(
        default=86400,
        ge=60,
        description="events older than this leave the live stream's log (a client "
        "reconnecting later reloads the queue); the log is swept once a minute",
    )
    revision_limit: int = Field(
        default=3,
        ge=0,
        le=20,
        description="revised plans the platform asks an agent for per request (a step "
        "rejected with feedback asks for one); past it the request ends rejected",
    )
    events_heartbeat_seconds: float = Field(
        default=15.0, gt=0, description="a comment line on an idle live event stream this often"
    )

    host: str = "127.0.0.1"
    port: int = 8000

    @field_validator("trusted_proxies")
    @classmethod
    def _cidrs(cls, value: list[str]) -> list[str]:
        for cidr in value:
            try:
                ipaddress.ip_network(cidr, strict=False)
            except ValueError as exc:
                raise ValueError(f"{cidr!r} is not an IP address or CIDR") from exc
        return value

    @model_validator(mode="after")
    def _dispatch_lease(self) -> Settings:
        """A claim must outlive the dispatch it covers, or a live replica loses it."""
        if self.dispatch_lease_seconds <= self.dispatch_timeout_seconds:
            raise ValueError(
                "HUMANWORK_DISPATCH_LEASE_SECONDS must exceed HUMANWORK_DISPATCH_TIMEOUT_SECONDS"
            )
        return self

    @model_validator(mode="after")
    def _claim_lease(self) -> Settings:
        """A live tool call must never outlast its claim's lease (it would be taken for a
        dead one and left to an expert)."""
        if self.tool_claim_lease_seconds < 4 * self.upstream_timeout_seconds:
            raise ValueError(
                "HUMANWORK_TOOL_CLAIM_LEASE_SECONDS must be at least 4 times "
                "HUMANWORK_UPSTREAM_TIMEOUT_SECONDS"
            )
        return self

    @model_validator(mode="after")
    def _tls_pair(self) -> Settings:
        """A certificate without its key (or the reverse) is a mistake, not plain HTTP."""
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ValueError("HUMANWORK_TLS_CERT_FILE and HUMANWORK_TLS_KEY_FILE go together")
        return self
