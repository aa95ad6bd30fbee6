"""Building blocks shared by the custom resource models.

The base model (camelCase on the wire, snake_case in Python, immutable), the Kubernetes
condition type, a loose view of object metadata, the helpers that attach Kubernetes schema
extensions (CEL rules, list types) to fields, and the CRD facts each resource declares
(names, printer columns, subresources). :mod:`humanwork_core.crdgen` reads all of these;
nothing here knows how a CRD is rendered.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, ClassVar, Self

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

GROUP = "humanwork.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
CATEGORY = "humanwork"
ORG_ID_LABEL = f"{GROUP}/org-id"

UUID_PATTERN = r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
"""Canonical lowercase UUID, so that string equality with the namespace label is reliable."""
DNS_LABEL_PATTERN = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
"""An RFC 1035 label: what Service and ServiceAccount names derived from it need."""
NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
"""An RFC 1123 subdomain: any Kubernetes object name."""
SHA256_PATTERN = r"^[0-9a-f]{64}$"


class ResourceModel(BaseModel):
    """Base of every model that appears in a custom resource.

    camelCase aliases on the wire, snake_case attribute names, both accepted on input;
    frozen, so that the pure functions that take a model can only return a new one;
    unknown fields are refused so that a typo in a manifest fails in the tests rather than
    being pruned silently by the API server.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        extra="forbid",
    )

    def to_wire(self) -> dict[str, Any]:
        """The JSON-ready dict the API server stores: camelCase keys, no null fields."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    @classmethod
    def from_wire(cls, data: Any) -> Self:
        """Validate a dict as read from the API server or a manifest."""
        return cls.model_validate(data)


# --- Kubernetes schema extensions attached to fields -------------------------------------


def cel(
    rule: str, message: str, *, field_path: str | None = None, reason: str | None = None
) -> dict[str, str]:
    """One `x-kubernetes-validations` entry: a CEL rule with the message users see."""
    entry = {"rule": rule, "message": message}
    if field_path is not None:
        entry["fieldPath"] = field_path
    if reason is not None:
        entry["reason"] = reason
    return entry


def k8s(
    *,
    rules: Sequence[dict[str, str]] = (),
    list_map_keys: Sequence[str] | None = None,
    list_type: str | None = None,
    preserve_unknown_fields: bool = False,
    int_or_string: bool = False,
    default: Any = None,
    format: str | None = None,
) -> dict[str, Any]:
    """The Kubernetes-specific keywords a field adds to its schema (`json_schema_extra`)."""
    extra: dict[str, Any] = {}
    if format is not None:
        extra["format"] = format
    if default is not None:
        extra["default"] = default
    if list_map_keys is not None:
        extra["x-kubernetes-list-type"] = "map"
        extra["x-kubernetes-list-map-keys"] = list(list_map_keys)
    elif list_type is not None:
        extra["x-kubernetes-list-type"] = list_type
    if preserve_unknown_fields:
        extra["x-kubernetes-preserve-unknown-fields"] = True
    if int_or_string:
        extra["x-kubernetes-int-or-string"] = True
    if rules:
        extra["x-kubernetes-validations"] = list(rules)
    return extra


# --- Conditions (Kubernetes API conventions) ---------------------------------------------


class ConditionStatus(StrEnum):
    """Status of a condition: True, False or Unknown."""

    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Condition(ResourceModel):
    """One aspect of the object's current state, following the Kubernetes API conventions."""

    type: str = Field(
        description="Type of condition in CamelCase, for example Ready.",
        min_length=1,
        max_length=316,
        pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
        r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
    )
    status: ConditionStatus = Field(description="Status of the condition: True, False or Unknown.")
    reason: str = Field(
        description="Machine-readable CamelCase reason for the last transition.",
        min_length=1,
        max_length=1024,
        pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
    )
    message: str = Field(
        default="",
        description="Human-readable details about the last transition; may be empty.",
        max_length=32768,
    )
    last_transition_time: AwareDatetime = Field(
        description="When the condition last changed from one status to another."
    )
    observed_generation: int | None = Field(
        default=None,
        ge=0,
        description="The metadata.generation the condition was computed from.",
    )


CONDITIONS_MAX = 16


def conditions_field(description: str) -> Any:
    """A `conditions` list keyed by type, as the API conventions prescribe."""
    return Field(
        default=(),
        max_length=CONDITIONS_MAX,
        description=description,
        json_schema_extra=k8s(list_map_keys=["type"]),
    )


def set_condition(
    conditions: Iterable[Condition], new: Condition, *, now: datetime
) -> tuple[Condition, ...]:
    """Replace or add the condition of `new.type`.

    The transition time moves only when the status changes (else the old one is kept);
    `now` is used when the caller passes a condition for a type that had none.
    """
    result: list[Condition] = []
    replaced = False
    for existing in conditions:
        if existing.type != new.type:
            result.append(existing)
            continue
        replaced = True
        if existing.status == new.status:
            result.append(
                new.model_copy(update={"last_transition_time": existing.last_transition_time})
            )
        else:
            result.append(new.model_copy(update={"last_transition_time": now}))
    if not replaced:
        result.append(new.model_copy(update={"last_transition_time": now}))
    return tuple(result)


def find_condition(conditions: Iterable[Condition], type_: str) -> Condition | None:
    """The condition of the given type, or None."""
    return next((c for c in conditions if c.type == type_), None)


# --- Object metadata ---------------------------------------------------------------------


class ObjectMeta(BaseModel):
    """The parts of metadata the components read; everything else is kept as extra."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, extra="allow"
    )

    name: str = Field(min_length=1, max_length=253, description="Name of the object.")
    namespace: str | None = Field(default=None, description="Namespace of the object.")
    labels: dict[str, str] = Field(default_factory=dict, description="Labels.")
    annotations: dict[str, str] = Field(default_factory=dict, description="Annotations.")
    uid: str | None = Field(default=None, description="Unique id assigned by the API server.")
    generation: int | None = Field(default=None, description="Spec generation.")
    resource_version: str | None = Field(default=None, description="Opaque version.")
    creation_timestamp: datetime | None = Field(default=None, description="Creation time.")


# --- Facts for the CustomResourceDefinition ----------------------------------------------


@dataclass(frozen=True)
class PrinterColumn:
    """An `additionalPrinterColumns` entry for `kubectl get`."""

    name: str
    type: str
    json_path: str
    description: str
    format: str | None = None
    priority: int = 0


@dataclass(frozen=True)
class ScaleSubresource:
    """Paths of the `scale` subresource, so that `kubectl scale` and autoscalers work."""

    spec_replicas_path: str
    status_replicas_path: str
    label_selector_path: str | None = None


@dataclass(frozen=True)
class CrdInfo:
    """Names, columns and subresources of one custom resource (group and version are fixed)."""

    kind: str
    plural: str
    singular: str
    short_names: tuple[str, ...]
    printer_columns: tuple[PrinterColumn, ...]
    categories: tuple[str, ...] = (CATEGORY,)
    scale: ScaleSubresource | None = None
    selectable_fields: tuple[str, ...] = ()
    root_rules: tuple[dict[str, str], ...] = field(default=())

    @property
    def crd_name(self) -> str:
        """The CRD's metadata.name: `<plural>.<group>`."""
        return f"{self.plural}.{GROUP}"


class KubeResource(ResourceModel):
    """Base of a whole custom resource object; subclasses declare `crd`, `spec` and `status`."""

    crd: ClassVar[CrdInfo]
    spec_model: ClassVar[type[ResourceModel]]
    status_model: ClassVar[type[ResourceModel]]

    api_version: str = Field(default=API_VERSION, description="API version of the object.")
    kind: str = Field(description="Kind of the object.")
    metadata: ObjectMeta = Field(description="Standard object metadata.")

    @model_validator(mode="after")
    def _type_meta(self) -> Self:
        if self.api_version != API_VERSION:
            raise ValueError(f"apiVersion must be {API_VERSION}, not {self.api_version}")
        if self.kind != self.crd.kind:
            raise ValueError(f"kind must be {self.crd.kind}, not {self.kind}")
        return self
