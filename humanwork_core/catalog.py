"""The action catalog: every tool and action an agent may ask the platform to run.

One source of truth, read by everyone who must agree on what an action is:

- the agent (planning prompts, its read-only chat functions, the risk it gives a step),
- the platform's tool proxy and its upstream adapters (which actions exist, which
  parameters they take, which ones change the upstream and so need an approved step),
- the platform's `GET /tools` (the catalog for clients),
- the approval rules in :mod:`humanwork_core.taskflow` (a step's effective risk and quorum),
- the AgenticTask CRD (a step may not declare less than its action's minimum risk).

Each action says whether it is read-only or has a side effect, the minimum risk a step
calling it carries, and whether a step calling it that failed may be run again by an
expert's retry (`retry_safe`: every read; a write only where running it twice leaves the
upstream as running it once, such as setting an absolute value; never a delta).
A step's *effective* risk is the higher of what it declares and that minimum, so whoever
writes a plan (an agent, a requester, kubectl) cannot lower the bar by declaring `low`. A
side-effecting action is never below `medium` (checked at import).

Pure data and functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .risk import Risk

JsonSchema = Mapping[str, Any]

_ID: JsonSchema = {"type": ["integer", "string"], "description": "numeric id"}
_IDS: JsonSchema = {"type": "array", "items": _ID, "maxItems": 50}
_TIME: JsonSchema = {"type": "string", "format": "date-time"}
_TEXT: JsonSchema = {"type": "string", "maxLength": 4096}
_STRINGS: JsonSchema = {"type": "array", "items": {"type": "string"}}


@dataclass(frozen=True)
class Param:
    """One parameter of an action: its name, JSON schema and whether it is required."""

    name: str
    schema: JsonSchema
    required: bool = False


@dataclass(frozen=True)
class Action:
    """One action of a tool."""

    tool: str
    name: str
    side_effect: bool
    min_risk: Risk
    description: str
    params: tuple[Param, ...] = ()
    retry_safe: bool = False
    """Whether an expert may retry a failed step calling it (every read; idempotent writes)."""

    @property
    def required(self) -> tuple[str, ...]:
        """Names of the parameters the action needs."""
        return tuple(p.name for p in self.params if p.required)

    @property
    def optional(self) -> tuple[str, ...]:
        """Names of the parameters the action may take."""
        return tuple(p.name for p in self.params if not p.required)

    @property
    def param_names(self) -> tuple[str, ...]:
        """Names of every parameter the action takes (required first)."""
        return self.required + self.optional

    def json_schema(self) -> dict[str, Any]:
        """The action's parameters as one JSON schema object (for function calling)."""
        return {
            "type": "object",
            "properties": {p.name: dict(p.schema) for p in self.params},
            "required": list(self.required),
            "additionalProperties": False,
        }

    def to_dict(self) -> dict[str, Any]:
        """The action as JSON-ready data (`GET /tools`)."""
        return {
            "name": self.name,
            "sideEffect": self.side_effect,
            "minRisk": self.min_risk.value,
            "retrySafe": self.retry_safe,
            "description": self.description,
            "parameters": self.json_schema(),
        }


@dataclass(frozen=True)
class Tool:
    """A tool the platform's proxy runs (`POST /v1/agent-api/tools/{name}`)."""

    name: str
    integration_type: str
    description: str
    actions: Mapping[str, Action] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The tool as JSON-ready data (`GET /tools`)."""
        return {
            "name": self.name,
            "aliases": list(self.aliases),
            "integrationType": self.integration_type,
            "description": self.description,
            "actions": [a.to_dict() for a in self.actions.values()],
        }


def _read(tool: str, name: str, description: str, *params: Param) -> Action:
    return Action(tool, name, False, Risk.LOW, description, params, retry_safe=True)


def _write(tool: str, name: str, risk: Risk, description: str, *params: Param) -> Action:
    return Action(tool, name, True, risk, description, params)


def _idempotent_write(tool: str, name: str, risk: Risk, description: str, *params: Param) -> Action:
    """A write that sets an absolute value: running it twice equals running it once."""
    return Action(tool, name, True, risk, description, params, retry_safe=True)


def _tool(
    name: str, integration: str, description: str, aliases: tuple[str, ...], *actions: Action
) -> Tool:
    return Tool(
        name, integration, description, MappingProxyType({a.name: a for a in actions}), aliases
    )


_SHOPIFY = _tool(
    "shopify",
    "shopify",
    "Shopify Admin API of the org's store",
    ("shopify_query",),
    _read(
        "shopify",
        "listOrders",
        "List orders (GET orders.json), all pages up to the bound. status: "
        "open|closed|cancelled|any (default any); created_at_min/created_at_max: ISO 8601; "
        "limit: page size 1-250 (default 250). Returns {orders, pages, truncated, nextPageInfo}.",
        Param("status", {"type": "string", "enum": ["open", "closed", "cancelled", "any"]}),
        Param("created_at_min", _TIME),
        Param("created_at_max", _TIME),
        Param("limit", {"type": "integer", "minimum": 1, "maximum": 250}),
    ),
    _read(
        "shopify",
        "getOrder",
        "One order by its numeric id (GET orders/{id}.json). Returns {order}.",
        Param("id", _ID, required=True),
    ),
    _read(
        "shopify",
        "listProducts",
        "List products with their variants (sku, inventory_item_id) (GET products.json), all "
        "pages up to the bound. ids: product ids; limit: page size 1-250. Returns {products, "
        "pages, truncated, nextPageInfo}.",
        Param("ids", _IDS),
        Param("limit", {"type": "integer", "minimum": 1, "maximum": 250}),
    ),
    _read(
        "shopify",
        "getInventoryLevels",
        "Inventory levels (GET inventory_levels.json) of inventory_item_ids, location_ids "
        "and/or sku (a SKU or a list, resolved through the products); at least one; lists of "
        "up to 50. Returns {inventory_levels} (and {skus: {sku: inventory_item_id}} with sku).",
        Param("inventory_item_ids", _IDS),
        Param("location_ids", _IDS),
        Param("sku", {"type": ["string", "array"], "items": {"type": "string"}}),
    ),
    _idempotent_write(
        "shopify",
        "setInventoryLevel",
        Risk.HIGH,
        "Set the available quantity of an inventory item at a location (POST "
        "inventory_levels/set.json). available; inventory_item_id or sku; location_id "
        "(default the integration's locationId, else the shop's primary location); reason: "
        "free text, not sent. Returns {inventory_level}.",
        Param("available", {"type": "integer"}, required=True),
        Param("inventory_item_id", _ID),
        Param("sku", {"type": "string"}),
        Param("location_id", _ID),
        Param("reason", _TEXT),
    ),
    _write(
        "shopify",
        "adjustInventoryLevel",
        Risk.HIGH,
        "Change available quantities by non-zero deltas (POST inventory_levels/adjust.json, "
        "one per change). Either available_adjustment with inventory_item_id or sku (and "
        "location_id, defaulted as for setInventoryLevel), returning {inventory_level}; or "
        "adjustments: a list of up to 50 {sku or inventory_item_id, delta, location_id?}, all "
        "resolved before the first change, returning {inventory_levels, adjustments}. reason "
        "and reconcile (where the numbers came from) are kept, not sent.",
        Param("inventory_item_id", _ID),
        Param("sku", {"type": "string"}),
        Param("location_id", _ID),
        Param("available_adjustment", {"type": "integer"}),
        Param("adjustments", {"type": "array", "items": {"type": "object"}, "maxItems": 50}),
        Param("reason", _TEXT),
        Param("reconcile", {}),
    ),
)

_AMAZON = _tool(
    "amazon",
    "amazon",
    "Amazon Selling Partner API of the org's seller account",
    ("amazon_query",),
    _read(
        "amazon",
        "listOrders",
        "Orders created in a period (GET /orders/v0/orders), every page up to the bound. "
        "CreatedAfter (required) and CreatedBefore: ISO 8601; OrderStatuses: list; "
        "MarketplaceIds: list (default the integration's marketplaceId). Returns {orders, "
        "pages, truncated, nextToken}.",
        Param("CreatedAfter", _TIME, required=True),
        Param("CreatedBefore", _TIME),
        Param("OrderStatuses", _STRINGS),
        Param("MarketplaceIds", _STRINGS),
    ),
    _read(
        "amazon",
        "getOrder",
        "One order (GET /orders/v0/orders/{orderId}). Returns {order}.",
        Param("orderId", {"type": "string"}, required=True),
    ),
    _read(
        "amazon",
        "getOrderItems",
        "An order's items with SellerSKU and QuantityOrdered (GET "
        "/orders/v0/orders/{orderId}/orderItems), every page up to the bound. Returns "
        "{orderId, orderItems, pages, truncated, nextToken}.",
        Param("orderId", {"type": "string"}, required=True),
    ),
    _idempotent_write(
        "amazon",
        "updateListingQuantity",
        Risk.HIGH,
        "Set the quantity a seller-fulfilled listing offers (PATCH "
        "/listings/2021-08-01/items/{sellerId}/{sku}, fulfillment_availability). sku, quantity "
        "(>= 0); sellerId (default the integration's sellerId); productType (default "
        "PRODUCT); MarketplaceIds. Returns {sku, status, submissionId, issues}.",
        Param("sku", {"type": "string"}, required=True),
        Param("quantity", {"type": "integer", "minimum": 0}, required=True),
        Param("sellerId", {"type": "string"}),
        Param("productType", {"type": "string"}),
        Param("MarketplaceIds", _STRINGS),
    ),
)

# UC-8: a read-only fetch of a web page, through the proxy
_WEB = _tool(
    "web",
    "web",
    "Read-only fetch of a public web page on the org's domain allowlist",
    (),
    _read(
        "web",
        "fetch",
        "GET one page (https, or an allowed test endpoint) whose host is on the org's "
        "allowedDomains, following up to 5 redirects that stay on it; private, link-local "
        "and metadata addresses are refused; the body is cut off at the platform's size "
        "limit (refused beyond it). Returns {url, status, contentType, bytes, text}.",
        Param("url", {"type": "string", "format": "uri", "maxLength": 2048}, required=True),
    ),
)

TOOLS: Mapping[str, Tool] = MappingProxyType({t.name: t for t in (_SHOPIFY, _AMAZON, _WEB)})
"""Every tool of the catalog by its canonical name."""

ALIASES: Mapping[str, str] = MappingProxyType(
    {alias: tool.name for tool in TOOLS.values() for alias in tool.aliases}
)
"""Other spellings of the tools (the seeds' `shopify_query`) to their canonical names."""


def tool_name(name: str) -> str:
    """The canonical name of a tool, whatever spelling a plan or a model used."""
    key = name.strip().lower()
    return ALIASES.get(key, key)


def find_tool(name: str | None) -> Tool | None:
    """The tool called `name` (or an alias of it), or None."""
    return TOOLS.get(tool_name(name)) if isinstance(name, str) else None


def find(tool: str | None, action: object) -> Action | None:
    """The catalog entry of `tool`.`action`, or None when either is unknown."""
    entry = find_tool(tool)
    if entry is None or not isinstance(action, str):
        return None
    return entry.actions.get(action)


def minimum_risk(tool: str | None, action: object) -> Risk | None:
    """The least risk a step calling `tool`.`action` carries, or None for an unknown one."""
    known = find(tool, action)
    return known.min_risk if known is not None else None


def higher(*risks: Risk | None) -> Risk:
    """The highest of the given levels (low when none)."""
    present = [r for r in risks if r is not None]
    return max(present, key=lambda r: r.rank) if present else Risk.LOW


def retry_safe(tool: str | None, action: object) -> bool:
    """Whether a failed step calling `tool`.`action` may be retried (False when unknown)."""
    known = find(tool, action)
    return known is not None and known.retry_safe


def side_effect_actions(minimum: Risk) -> dict[str, tuple[str, ...]]:
    """For each tool name (aliases included), the actions whose minimum risk is `minimum`."""
    found: dict[str, tuple[str, ...]] = {}
    for tool in TOOLS.values():
        names = tuple(a.name for a in tool.actions.values() if a.min_risk is minimum)
        if names:
            for spelling in (tool.name, *tool.aliases):
                found[spelling] = names
    return found


def _check() -> None:
    for tool in TOOLS.values():
        for action in tool.actions.values():
            if action.side_effect and action.min_risk.rank < Risk.MEDIUM.rank:
                raise AssertionError(f"{tool.name}.{action.name} has a side effect: not low")


_check()
