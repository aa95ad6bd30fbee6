"""What an agent knows, read only from what its pod gives it: environment variables and
the files its Secrets and ConfigMap are mounted as. No database URL, no third-party
credential: the only secret besides its platform token and HMAC key is the LLM key."""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field, SecretStr
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
    agent_port: int = 8080
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
