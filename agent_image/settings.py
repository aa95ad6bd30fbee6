"""What an agent knows, read only from what its pod gives it: environment variables and
the files its Secrets and ConfigMap are mounted as. No database URL, no third-party
credential: the only secret besides its platform token and HMAC key is the LLM key."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class AgentSettings(BaseSettings):
    """The agent's settings (environment prefix `HUMANWORK_`, as the operator sets them)."""

    model_config = SettingsConfigDict(env_prefix="HUMANWORK_", extra="ignore")

    agent_id: str
    agent_name: str
    org_id: str
    namespace: str
    platform_url: str
    callback_url: str
    platform_ca_file: Path | None = None
    """PEM CA bundle the platform's certificate is verified against (the operator mounts
    it from a ConfigMap; re-read when it changes: agent_image.tls). Unset: the system's CAs
    for an https URL."""
    agent_port: int = 8080
    # --- metrics --------------------------------------------------------------------------
    agent_metrics_port: int = Field(default=0, ge=0, le=65535)
    """Port of the agent's Prometheus `/metrics` endpoint (bound on `HUMANWORK_HOST`); 0: off.
    Never the command port (refused); set by the operator from its own
    `agent_metrics_port`, and only its metrics NetworkPolicy rule lets anyone reach it."""
    token_file: Path
    callback_secret_file: Path
    config_file: Path
    kube_api_dir: Path = Path("/var/run/secrets/kubernetes.io/serviceaccount")
    """The projected ServiceAccount token, the cluster CA and the namespace."""
    kube_host: str = Field(
        default="", validation_alias=AliasChoices("KUBERNETES_SERVICE_HOST", "HUMANWORK_KUBE_HOST")
    )
    kube_port: int = Field(
        default=443,
        validation_alias=AliasChoices("KUBERNETES_SERVICE_PORT", "HUMANWORK_KUBE_PORT"),
    )
    state_dir: Path = Path("/tmp/humanwork-agent")
    """Where the agent keeps its local checkpoints and few-shot store."""
    llm_base_url: str = ""
    llm_api_key: SecretStr | None = None
    host: str = "0.0.0.0"
    config_poll_seconds: float = 2.0
    llm_timeout_seconds: float = 60.0
    llm_max_retries: int = 3
    default_mode: str = Field(
        default="",
        validation_alias=AliasChoices("AGENT_DEFAULT_MODE", "HUMANWORK_DEFAULT_MODE"),
    )
    """`agentic` makes every request agentic (seed 000's `AGENT_DEFAULT_MODE`)."""
    event_outbox_seconds: float = 5.0
    """How often undelivered events are retried."""
    tool_path: Literal["native", "mcp"] = "native"
    """How the agent calls its tools: `native`, the tool proxy's own endpoint
    (`POST /v1/agent-api/tools/{tool}`), or `mcp`, the platform's MCP endpoint
    (`/v1/agent-api/mcp`, `tools/call`); the same checks, ledger and receipts behind both.
    Set by the operator from its `agent_tool_path`."""

    @model_validator(mode="after")
    def _metrics_apart(self) -> AgentSettings:
        """The metrics never share the command port (whose commands are signed and whose
        NetworkPolicy rule admits only the platform)."""
        if self.agent_metrics_port and self.agent_metrics_port == self.agent_port:
            raise ValueError("HUMANWORK_AGENT_METRICS_PORT must differ from HUMANWORK_AGENT_PORT")
        return self
