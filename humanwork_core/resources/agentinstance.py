"""The AgentInstance custom resource: the desired sandboxed agent of one org.

Spec is written by platform teams (kubectl, GitOps); status is written by the operator.
These models are the single source of truth for the CRD (see :mod:`humanwork_core.crdgen`).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Hashable
from enum import StrEnum
from typing import Annotated, ClassVar, Self

from pydantic import (
    AfterValidator,
    AwareDatetime,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from .common import (
    DNS_LABEL_PATTERN,
    NAME_PATTERN,
    SHA256_PATTERN,
    UUID_PATTERN,
    Condition,
    CrdInfo,
    KubeResource,
    PrinterColumn,
    ResourceModel,
    ScaleSubresource,
    cel,
    conditions_field,
    k8s,
)

TOOL_NAME_PATTERN = r"^[a-z][a-z0-9_]*$"
QUANTITY_PATTERN = r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$"
DAY_SECONDS = 86_400
KEYWORD_PATTERN = r"^[a-z0-9][a-z0-9-]*( [a-z0-9][a-z0-9-]*)*$"
"""A routing keyword: lowercase words (letters, digits, hyphens) separated by single spaces."""
Keyword = Annotated[str, Field(min_length=1, max_length=63, pattern=KEYWORD_PATTERN)]


def _unique(value: tuple[Hashable, ...]) -> tuple[Hashable, ...]:
    if len(set(value)) != len(value):
        raise ValueError("items must be unique")
    return value


class AgentInstancePhase(StrEnum):
    """Coarse summary of an AgentInstance's lifecycle (details are in the conditions)."""

    PENDING = "Pending"
    PROVISIONING = "Provisioning"
    READY = "Ready"
    DEGRADED = "Degraded"
    PAUSED = "Paused"
    FAILED = "Failed"


class Specialist(ResourceModel):
    """The persona the agent plays."""

    name: str = Field(
        description="Display name of the specialist persona, for example Bob.",
        min_length=1,
        max_length=63,
    )
    system_prompt: str = Field(
        description="System prompt that defines the persona's role, tone and limits.",
        min_length=1,
        max_length=32768,
    )
    # routing: what a request that names no agent is matched against
    description: str | None = Field(
        default=None,
        description="What the specialist handles, in a sentence; the router shows it to the "
        "LLM when the platform has one configured.",
        min_length=1,
        max_length=1024,
    )
    keywords: tuple[Keyword, ...] = Field(
        default=(),
        description="Words or phrases (lowercase) of the requests this specialist takes, for "
        "example shopify or purchase order: the platform's router sends a request that names "
        "no agent to the org's agent whose keywords it matches best.",
        max_length=64,
        json_schema_extra=k8s(list_type="set"),
    )

    _unique_keywords = field_validator("keywords")(_unique)


class SecretKeyRef(ResourceModel):
    """A key of a Secret in the AgentInstance's namespace."""

    name: str = Field(
        description="Name of the Secret, in the same namespace as the AgentInstance.",
        min_length=1,
        max_length=253,
        pattern=NAME_PATTERN,
    )
    key: str = Field(
        description="Key inside the Secret's data.",
        min_length=1,
        max_length=253,
        pattern=r"^[-._a-zA-Z0-9]+$",
    )


class LlmEndpoint(ResourceModel):
    """Where the agent calls its language model, and the only secret the agent holds."""

    base_url: str = Field(
        alias="baseURL",
        description="Base URL of the OpenAI-compatible LLM API, for example "
        "https://openrouter.ai/api/v1.",
        min_length=1,
        max_length=2048,
        pattern=r"^https?://[^\s]+$",
    )
    api_key_secret_ref: SecretKeyRef = Field(
        description="Secret key that holds the LLM API key; mounted into the agent pod only."
    )


def _check_cidr(value: str) -> str:
    try:
        ipaddress.ip_network(value, strict=True)
    except ValueError as exc:
        raise ValueError(f"{value!r} is not a CIDR (like 203.0.113.0/24): {exc}") from exc
    return value


def _check_quantity(value: int | str) -> int | str:
    if isinstance(value, str) and not re.fullmatch(QUANTITY_PATTERN, value):
        raise ValueError(f"{value!r} is not a Kubernetes quantity (like 250m or 256Mi)")
    if isinstance(value, int) and value < 0:
        raise ValueError("a quantity is not negative")
    return value


Cidr = Annotated[
    str, Field(max_length=49, json_schema_extra={"format": "cidr"}), AfterValidator(_check_cidr)
]
Port = Annotated[int, Field(ge=1, le=65535)]
ToolName = Annotated[str, Field(min_length=1, max_length=63, pattern=TOOL_NAME_PATTERN)]
Quantity = Annotated[int | str, AfterValidator(_check_quantity)]


class EgressRule(ResourceModel):
    """An extra destination the agent may reach."""

    cidr: Cidr = Field(description="Destination network in CIDR notation, e.g. 203.0.113.0/24.")
    ports: tuple[Port, ...] = Field(
        default=(443,),
        description="TCP ports allowed to that network (default 443).",
        min_length=1,
        max_length=16,
        json_schema_extra=k8s(list_type="set"),
    )

    _unique_ports = field_validator("ports")(_unique)


class Egress(ResourceModel):
    """Network egress the agent is allowed beyond DNS and the platform API."""

    llm_cidrs: tuple[Cidr, ...] = Field(
        default=(),
        alias="llmCIDRs",
        description="Networks of the LLM provider endpoints, reached on TCP 443.",
        max_length=32,
        json_schema_extra=k8s(list_type="set"),
    )
    extra: tuple[EgressRule, ...] = Field(
        default=(),
        description="Further destinations, each with its own ports.",
        max_length=32,
        json_schema_extra=k8s(list_type="atomic"),
    )

    _unique_cidrs = field_validator("llm_cidrs")(_unique)


class TolerationOperator(StrEnum):
    EXISTS = "Exists"
    EQUAL = "Equal"


class TaintEffect(StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


LABEL_KEY_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
LABEL_VALUE_PATTERN = r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$"
LabelKey = Annotated[str, Field(min_length=1, max_length=317, pattern=LABEL_KEY_PATTERN)]
LabelValue = Annotated[str, Field(max_length=63, pattern=LABEL_VALUE_PATTERN)]


class Toleration(ResourceModel):
    """A taint the agent pods tolerate (as in a pod spec), for nodes set aside for sandboxes."""

    model_config = ConfigDict(
        json_schema_extra=k8s(
            rules=[
                cel(
                    "self.operator != 'Exists' || !has(self.value) || self.value == ''",
                    "a toleration with operator Exists has no value",
                ),
            ]
        )
    )

    key: LabelKey | None = Field(default=None, description="Taint key; empty matches all keys.")
    operator: TolerationOperator = Field(
        default=TolerationOperator.EQUAL, description="Exists or Equal (default)."
    )
    value: LabelValue | None = Field(default=None, description="Taint value for Equal.")
    effect: TaintEffect | None = Field(
        default=None, description="NoSchedule, PreferNoSchedule or NoExecute; empty: all."
    )
    toleration_seconds: int | None = Field(
        default=None, ge=0, description="How long a NoExecute taint is tolerated."
    )

    @model_validator(mode="after")
    def _exists_has_no_value(self) -> Self:
        if self.operator is TolerationOperator.EXISTS and self.value:
            raise ValueError("a toleration with operator Exists has no value")
        return self


class TokenPolicy(ResourceModel):
    """Lifetime and rotation of the agent's platform API token."""

    model_config = ConfigDict(
        json_schema_extra=k8s(
            rules=[
                cel(
                    "!has(self.rotateBeforeSeconds) || !has(self.ttlSeconds) || "
                    "self.rotateBeforeSeconds < self.ttlSeconds",
                    "token.rotateBeforeSeconds must be smaller than token.ttlSeconds",
                    field_path=".rotateBeforeSeconds",
                )
            ]
        )
    )

    ttl_seconds: int = Field(
        default=DAY_SECONDS,
        ge=300,
        le=30 * DAY_SECONDS,
        description="Lifetime of each issued token in seconds (default 86400, one day).",
    )
    rotate_before_seconds: int = Field(
        default=3600,
        ge=60,
        le=30 * DAY_SECONDS,
        description="How long before expiry a new token is issued; the previous one stays "
        "valid for this long as a grace period.",
    )

    @model_validator(mode="after")
    def _rotation_window(self) -> Self:
        if self.rotate_before_seconds >= self.ttl_seconds:
            raise ValueError("token.rotateBeforeSeconds must be smaller than token.ttlSeconds")
        return self


class ResourceList(ResourceModel):
    """CPU and memory quantities."""

    cpu: Quantity | None = Field(
        default=None,
        description="CPU quantity, for example 250m or 1.",
        json_schema_extra=k8s(int_or_string=True),
    )
    memory: Quantity | None = Field(
        default=None,
        description="Memory quantity, for example 256Mi.",
        json_schema_extra=k8s(int_or_string=True),
    )


class ResourceRequirements(ResourceModel):
    """Compute resources of each agent container."""

    requests: ResourceList = Field(
        default_factory=lambda: ResourceList(cpu="250m", memory="256Mi"),
        description="Minimum resources reserved for the agent container.",
    )
    limits: ResourceList = Field(
        default_factory=lambda: ResourceList(cpu="500m", memory="512Mi"),
        description="Maximum resources the agent container may use.",
    )


class Autoscaling(ResourceModel):
    """Scale the agent with its open work: the operator sets
    `spec.replicas` through the scale subresource to ceil(open tasks / openTasksPerReplica),
    kept within minReplicas..maxReplicas; scaling down waits for the operator's cooldown."""

    model_config = ConfigDict(
        json_schema_extra=k8s(
            rules=[
                cel(
                    "!has(self.minReplicas) || self.minReplicas <= self.maxReplicas",
                    "autoscaling.minReplicas must not exceed autoscaling.maxReplicas",
                    field_path=".minReplicas",
                )
            ]
        )
    )

    min_replicas: int = Field(
        default=1,
        ge=0,
        le=20,
        description="Fewest agent pods (default 1); 0 lets an agent with no open work stop.",
    )
    max_replicas: int = Field(ge=1, le=20, description="Most agent pods.")
    open_tasks_per_replica: int | None = Field(
        default=None,
        ge=1,
        le=100,
        description="Open tasks (AgenticTasks of this agent not in a terminal phase) one pod "
        "takes; spec.maxConcurrentTasks when unset.",
    )

    @model_validator(mode="after")
    def _bounds(self) -> Self:
        if self.min_replicas > self.max_replicas:
            raise ValueError("autoscaling.minReplicas must not exceed autoscaling.maxReplicas")
        return self


class AgentInstanceSpec(ResourceModel):
    """Desired state of an org's agent: persona, model, tools, scale, sandbox and token policy."""

    org_id: str = Field(
        description="UUID of the client org; must equal the namespace's humanwork.io/org-id "
        "label. Immutable.",
        pattern=UUID_PATTERN,
        max_length=36,
        json_schema_extra=k8s(
            format="uuid",
            rules=[cel("self == oldSelf", "spec.orgId is immutable", reason="FieldValueForbidden")],
        ),
    )
    specialist: Specialist = Field(description="Persona and system prompt of the agent.")
    model: str = Field(
        description="Language model identifier, for example openai/gpt-4o.",
        min_length=1,
        max_length=253,
    )
    temperature: float = Field(
        default=0.3, ge=0.0, le=2.0, description="Sampling temperature, from 0 to 2."
    )
    confidence_threshold: int = Field(
        default=70,
        ge=0,
        le=100,
        description="Confidence (0-100) below which a drafted reply goes to the expert queue; "
        "100: every drafted reply does, whatever confidence the agent reports.",
    )
    enabled_tools: tuple[ToolName, ...] = Field(
        default=(),
        description="Tools the agent may propose in plans (action catalog tools, e.g. shopify).",
        max_length=64,
        json_schema_extra=k8s(list_type="set"),
    )
    max_concurrent_tasks: int = Field(
        default=3, ge=1, le=100, description="How many tasks one agent works on at once."
    )
    replicas: int = Field(
        default=1, ge=0, le=20, description="Number of agent pods; 0 stops the agent."
    )
    autoscaling: Autoscaling | None = Field(
        default=None,
        description="Scale with the agent's open tasks; the operator then owns spec.replicas "
        "(leave it out of GitOps manifests, as with a HorizontalPodAutoscaler).",
    )
    paused: bool = Field(
        default=False,
        description="When true the agent takes no new work and its pods are scaled to zero.",
    )
    resources: ResourceRequirements = Field(
        default_factory=ResourceRequirements,
        description="CPU and memory of each agent container.",
        json_schema_extra=k8s(default={}),
    )
    image: str | None = Field(
        default=None,
        description="Agent container image; the operator's default image when unset.",
        min_length=1,
        max_length=512,
    )
    llm: LlmEndpoint = Field(description="Language model endpoint and its API key Secret.")
    egress: Egress = Field(
        default_factory=Egress,
        description="Network destinations the agent may reach besides DNS and the platform.",
        json_schema_extra=k8s(default={}),
    )
    token: TokenPolicy = Field(
        default_factory=TokenPolicy,
        description="Lifetime and rotation of the agent's platform API token.",
        json_schema_extra=k8s(default={}),
    )
    node_selector: dict[str, LabelValue] = Field(
        default_factory=dict,
        description="Node labels the agent pods must run on (pod spec nodeSelector).",
        max_length=32,
        json_schema_extra=k8s(
            rules=[
                cel(
                    f"self.all(k, size(k) <= 317 && k.matches(r'{LABEL_KEY_PATTERN}'))",
                    "nodeSelector keys are label keys",
                )
            ]
        ),
    )
    tolerations: tuple[Toleration, ...] = Field(
        default=(),
        description="Taints the agent pods tolerate (pod spec tolerations).",
        max_length=16,
        json_schema_extra=k8s(list_type="atomic"),
    )
    runtime_class_name: str | None = Field(
        default=None,
        description="RuntimeClass of the agent pods, e.g. gvisor or kata where the cluster "
        "has them; the cluster's default runtime when unset.",
        max_length=63,
        pattern=DNS_LABEL_PATTERN,
    )

    _unique_tools = field_validator("enabled_tools")(_unique)

    @field_validator("node_selector")
    @classmethod
    def _label_keys(cls, value: dict[str, str]) -> dict[str, str]:
        bad = [k for k in value if len(k) > 317 or not re.match(LABEL_KEY_PATTERN, k)]
        if bad:
            raise ValueError(f"nodeSelector keys that are not label keys: {bad}")
        return value


class TokenStatus(ResourceModel):
    """Metadata of the agent's current (and previous, in grace) platform API token."""

    kid: str = Field(description="Key id of the signing key.", max_length=128)
    jti: str = Field(description="Unique id of the current token.", max_length=128)
    issued_at: AwareDatetime = Field(description="When the current token was issued.")
    expires_at: AwareDatetime = Field(description="When the current token expires.")
    previous_jti: str | None = Field(
        default=None,
        description="Unique id of the previous token, still accepted until its grace ends.",
        max_length=128,
    )
    previous_grace_ends_at: AwareDatetime | None = Field(
        default=None, description="When the previous token stops being accepted."
    )
    secret_name: str = Field(
        description="Secret that holds the current token.",
        max_length=253,
        pattern=NAME_PATTERN,
    )


class AgentInstanceStatus(ResourceModel):
    """Observed state of an AgentInstance, written by the operator."""

    phase: AgentInstancePhase | None = Field(
        default=None, description="Coarse lifecycle summary; see conditions for details."
    )
    replicas: int | None = Field(
        default=None, ge=0, description="Number of agent pods that exist (scale subresource)."
    )
    ready_replicas: int | None = Field(
        default=None, ge=0, description="Number of agent pods that are ready."
    )
    selector: str | None = Field(
        default=None,
        description="Label selector of the agent pods, for the scale subresource.",
        max_length=1024,
    )
    endpoint: str | None = Field(
        default=None,
        description="In-cluster URL of the agent's control API.",
        max_length=2048,
    )
    token: TokenStatus | None = Field(
        default=None, description="Metadata of the agent's platform API tokens."
    )
    config_hash: str | None = Field(
        default=None,
        description="SHA-256 of the configuration last applied to the agent pods.",
        pattern=SHA256_PATTERN,
        max_length=64,
    )
    conditions: tuple[Condition, ...] = conditions_field(
        "Ready, TokenValid, NetworkIsolated and ConfigApplied, per the API conventions."
    )
    observed_generation: int | None = Field(
        default=None, ge=0, description="The metadata.generation this status reflects."
    )


class AgentInstance(KubeResource):
    """An org's sandboxed AI agent: one Deployment, ServiceAccount, token and network policy."""

    crd: ClassVar[CrdInfo] = CrdInfo(
        kind="AgentInstance",
        plural="agentinstances",
        singular="agentinstance",
        short_names=("ai", "agent"),
        scale=ScaleSubresource(
            spec_replicas_path=".spec.replicas",
            status_replicas_path=".status.replicas",
            label_selector_path=".status.selector",
        ),
        printer_columns=(
            PrinterColumn("Phase", "string", ".status.phase", "Lifecycle phase."),
            PrinterColumn("Ready", "integer", ".status.readyReplicas", "Ready agent pods."),
            PrinterColumn("Replicas", "integer", ".spec.replicas", "Desired agent pods."),
            PrinterColumn(
                "Token-Expiry",
                "string",
                ".status.token.expiresAt",
                "When the agent's current platform token expires.",
                format="date-time",
            ),
            PrinterColumn("Age", "date", ".metadata.creationTimestamp", "Time since creation."),
        ),
        selectable_fields=(".spec.orgId",),
        root_rules=(
            cel(
                "self.metadata.name.matches('" + DNS_LABEL_PATTERN + "') && "
                "size(self.metadata.name) <= 57",
                "an AgentInstance name is a DNS label (lowercase letters, digits and '-', "
                "starting with a letter) of at most 57 characters, because the agent's "
                "ServiceAccount is named <name>-agent",
            ),
        ),
    )
    spec_model: ClassVar[type[ResourceModel]] = AgentInstanceSpec
    status_model: ClassVar[type[ResourceModel]] = AgentInstanceStatus

    kind: str = Field(default="AgentInstance", description="Kind of the object.")
    spec: AgentInstanceSpec = Field(description="Desired state of the agent.")
    status: AgentInstanceStatus | None = Field(
        default=None, description="Observed state, written by the operator."
    )
