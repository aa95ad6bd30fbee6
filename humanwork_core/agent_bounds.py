"""What any AgentInstance may hold, whoever writes it: the bounds the platform team sets.

The bounds live in one place, the admission parameters (the ConfigMap
humanwork-system/humanwork-admission, keys `agent*` below, defaults in
manifests/base/policies/params.yaml). The API server enforces them on every AgentInstance
create and update (the policy humanwork-agent-instance-bounds, so kubectl and GitOps obey
them too); the platform API reads the same ConfigMap and checks a spec here first, so that
an org admin gets a 422 naming the field and the bound instead of the API server's
message. Pure: parses the ConfigMap's data and checks a spec as the API server holds it
(camelCase keys).

Lists are comma-separated. An image entry ending in `*` is a prefix; `*` alone in a list of
toleration keys, node selectors or runtime classes allows any. A node selector entry is a
label key (any value) or `key=value`. An egress CIDR may not overlap a denied network unless
it lies inside an allowed one; IPv4-mapped IPv6 networks are refused (they would name an
IPv4 address the denied list cannot see).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

PARAMS_CONFIG_MAP = "humanwork-admission"
"""The ConfigMap (in the platform's namespace) holding the admission parameters."""

IMAGES = "agentImages"
EGRESS_DENIED = "agentEgressDeniedCIDRs"
EGRESS_ALLOWED = "agentEgressAllowedCIDRs"
TOLERATION_KEYS = "agentTolerationKeys"
NODE_SELECTORS = "agentNodeSelectors"
RUNTIME_CLASSES = "agentRuntimeClasses"
MAX_CPU = "agentMaxCPU"
MAX_MEMORY = "agentMaxMemory"

DEFAULTS: Mapping[str, str] = {
    IMAGES: "humanwork/agent:*,humanwork/agent@*",
    EGRESS_DENIED: (
        "0.0.0.0/8,10.0.0.0/8,100.64.0.0/10,127.0.0.0/8,169.254.0.0/16,172.16.0.0/12,"
        "192.168.0.0/16,::/128,::1/128,::ffff:0:0/96,fc00::/7,fe80::/10"
    ),
    EGRESS_ALLOWED: "",
    TOLERATION_KEYS: "",
    NODE_SELECTORS: "",
    RUNTIME_CLASSES: "",
    MAX_CPU: "2",
    MAX_MEMORY: "4Gi",
}
"""The bounds where the ConfigMap names none: those of params.yaml (a test keeps them equal),
and of the admission policy's own defaults."""

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

_SUFFIXES: Mapping[str, Decimal] = {
    **{s: Decimal(1024) ** (i + 1) for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))},
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?)$")


class BoundsError(ValueError):
    """The ConfigMap's value for a bound does not read (a CIDR or quantity that is none)."""


def quantity(value: int | str) -> Decimal:
    """A Kubernetes quantity (`250m`, `4Gi`, `2`) as a number."""
    match = _QUANTITY.match(str(value).strip())
    if not match:
        raise BoundsError(f"{value!r} is not a Kubernetes quantity")
    try:
        return Decimal(match.group(1)) * _SUFFIXES[match.group(2)]
    except InvalidOperation:
        raise BoundsError(f"{value!r} is not a Kubernetes quantity") from None


def _items(text: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in text.split(",") if item.strip())


def _networks(key: str, text: str) -> tuple[Network, ...]:
    try:
        return tuple(ipaddress.ip_network(item, strict=False) for item in _items(text))
    except ValueError as exc:
        raise BoundsError(f"{key}: {exc}") from None


@dataclass(frozen=True)
class Violation:
    """One field of a spec beyond one bound."""

    field: str
    bound: str
    message: str


@dataclass(frozen=True)
class AgentBounds:
    """The bounds, parsed. `text` keeps each key's value as written (for messages)."""

    text: Mapping[str, str]
    egress_denied: tuple[Network, ...]
    egress_allowed: tuple[Network, ...]
    max_cpu: Decimal
    max_memory: Decimal

    @classmethod
    def from_params(cls, data: Mapping[str, str] | None) -> AgentBounds:
        """From the ConfigMap's data; a key it lacks takes its default."""
        text = {key: str((data or {}).get(key, default)) for key, default in DEFAULTS.items()}
        return cls(
            text=text,
            egress_denied=_networks(EGRESS_DENIED, text[EGRESS_DENIED]),
            egress_allowed=_networks(EGRESS_ALLOWED, text[EGRESS_ALLOWED]),
            max_cpu=quantity(text[MAX_CPU]),
            max_memory=quantity(text[MAX_MEMORY]),
        )

    def listed(self, key: str) -> tuple[str, ...]:
        return _items(self.text[key])

    def image_allowed(self, image: str) -> bool:
        return any(
            image == entry or (entry.endswith("*") and image.startswith(entry[:-1]))
            for entry in self.listed(IMAGES)
        )

    def cidr_refusal(self, text: str) -> str | None:
        """Why an egress CIDR is beyond the bounds, or None."""
        try:
            net = ipaddress.ip_network(text, strict=False)
        except ValueError:
            return f"{text} is not a CIDR"
        if isinstance(net, ipaddress.IPv6Network) and net.network_address.ipv4_mapped:
            return f"{text} is an IPv4-mapped IPv6 network; name the IPv4 network instead"
        if any(a.version == net.version and net.subnet_of(a) for a in self._same(net, True)):
            return None
        for denied in self._same(net, False):
            if net.subnet_of(denied) or net.supernet_of(denied):
                return f"{text} overlaps {denied}, a network the platform denies"
        return None

    def _same(self, net: Network, allowed: bool) -> Iterator[Any]:
        nets = self.egress_allowed if allowed else self.egress_denied
        return (n for n in nets if n.version == net.version)


def _egress(spec: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    egress = spec.get("egress") or {}
    for i, cidr in enumerate(egress.get("llmCIDRs") or ()):
        yield f"spec.egress.llmCIDRs[{i}]", str(cidr)
    for i, rule in enumerate(egress.get("extra") or ()):
        yield f"spec.egress.extra[{i}].cidr", str((rule or {}).get("cidr", ""))


def _scheduling(spec: Mapping[str, Any], bounds: AgentBounds) -> Iterator[Violation]:
    keys = bounds.listed(TOLERATION_KEYS)
    for i, toleration in enumerate(spec.get("tolerations") or ()):
        key = str((toleration or {}).get("key") or "")
        if "*" not in keys and (not key or key not in keys):
            shown = key or "(every taint)"
            yield Violation(
                f"spec.tolerations[{i}].key",
                TOLERATION_KEYS,
                f"a toleration of {shown} is not allowed (allowed keys: "
                f"{bounds.text[TOLERATION_KEYS] or 'none'})",
            )
    selectors = bounds.listed(NODE_SELECTORS)
    for key, value in sorted((spec.get("nodeSelector") or {}).items()):
        if "*" not in selectors and key not in selectors and f"{key}={value}" not in selectors:
            yield Violation(
                f"spec.nodeSelector.{key}",
                NODE_SELECTORS,
                f"the node selector {key}={value} is not allowed (allowed: "
                f"{bounds.text[NODE_SELECTORS] or 'none'})",
            )
    runtime = spec.get("runtimeClassName")
    classes = bounds.listed(RUNTIME_CLASSES)
    if runtime and "*" not in classes and runtime not in classes:
        yield Violation(
            "spec.runtimeClassName",
            RUNTIME_CLASSES,
            f"the runtime class {runtime} is not allowed (allowed: "
            f"{bounds.text[RUNTIME_CLASSES] or 'none'})",
        )


def _resources(spec: Mapping[str, Any], bounds: AgentBounds) -> Iterator[Violation]:
    resources = spec.get("resources") or {}
    for kind in ("requests", "limits"):
        for name, key, most in (
            ("cpu", MAX_CPU, bounds.max_cpu),
            ("memory", MAX_MEMORY, bounds.max_memory),
        ):
            value = (resources.get(kind) or {}).get(name)
            if value is None:
                continue
            try:
                beyond = quantity(value) > most
            except BoundsError:
                beyond = True
            if beyond:
                yield Violation(
                    f"spec.resources.{kind}.{name}",
                    key,
                    f"{name} {value} is above the most an agent may have ({bounds.text[key]})",
                )


def check(spec: Mapping[str, Any], bounds: AgentBounds) -> list[Violation]:
    """Every field of `spec` (an AgentInstance spec, camelCase) beyond the bounds."""
    found: list[Violation] = []
    image = spec.get("image")
    if image and not bounds.image_allowed(str(image)):
        found.append(
            Violation(
                "spec.image",
                IMAGES,
                f"the image {image} is not one the platform allows ({bounds.text[IMAGES]})",
            )
        )
    for field, cidr in _egress(spec):
        reason = bounds.cidr_refusal(cidr)
        if reason:
            found.append(Violation(field, EGRESS_DENIED, reason))
    found.extend(_scheduling(spec, bounds))
    found.extend(_resources(spec, bounds))
    return found
