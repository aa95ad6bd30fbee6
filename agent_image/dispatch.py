"""Dispatch and risk: the agent's two keyword heuristics (seed 000).

Mode: a request runs in *agentic* mode (a multi-step plan, each step approved by a human)
when it contains one of the seed's agentic keywords, or when the agent is told to default
to it (`AGENT_DEFAULT_MODE=agentic`, or `defaultMode` in the configuration); otherwise in
*domain* mode (the fast path: one answer, read-only tool calls through function calling).

Risk: every step carries a level, from the seed's table: read-only or informational is
low; minor, reversible writes are medium; significant writes that are hard to reverse are
high; destructive, financial or compliance-sensitive ones are critical. The level is the
highest of what the step's action says (:data:`TOOL_CATALOG` knows every action the
platform's tool proxy accepts) and what its words say. A language model's plan may
override it, within a floor: a side-effecting action is never below medium.

Pure functions, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from humanwork_core.resources import Risk


class Mode(StrEnum):
    """How the agent handles a request."""

    DOMAIN = "domain"
    AGENTIC = "agentic"


AGENTIC_KEYWORDS: tuple[str, ...] = (
    "build",
    "deploy",
    "script",
    "scrape",
    "automate",
    "crawl",
    "analyze all",
    "process batch",
    "create website",
    "write code",
)
"""The seed's list: any of these in a message switches to agentic mode."""


_VOWELS = "aeiou"


def _forms(word: str) -> str:
    """A regex of `word` and its common inflections: deploy, deploys, deployed, deploying;
    update, updated, updating; set, sets, setting; tag, tagged; payment, payments."""
    forms = {word, word + "s", word + "es", word + "ed", word + "d", word + "ing"}
    forms |= {word + "ment", word + "ments"}
    if word.endswith("e"):
        forms |= {word[:-1] + "ing", word[:-1] + "ed"}
    if (
        len(word) <= 4
        and word[-1] not in _VOWELS + "wxy"
        and len(word) >= 2
        and word[-2] in _VOWELS
    ):
        forms |= {word + word[-1] + "ing", word + word[-1] + "ed"}
    return "(?:" + "|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True)) + ")"


def _phrase(keyword: str) -> re.Pattern[str]:
    """Whole words, each in any common inflection ("deploys", "automated", "scraping")."""
    body = r"\s+".join(_forms(w) for w in keyword.lower().split())
    return re.compile(rf"\b{body}\b", re.IGNORECASE)


_AGENTIC = tuple((k, _phrase(k)) for k in AGENTIC_KEYWORDS)


def agentic_keywords(message: str) -> tuple[str, ...]:
    """The agentic keywords `message` contains, in the seed's order."""
    return tuple(k for k, pattern in _AGENTIC if pattern.search(message))


def choose_mode(message: str, default_mode: str | None = None) -> Mode:
    """Agentic when the message holds an agentic keyword or the default says so."""
    if (default_mode or "").strip().lower() == Mode.AGENTIC:
        return Mode.AGENTIC
    return Mode.AGENTIC if agentic_keywords(message) else Mode.DOMAIN


# --- tools -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Action:
    """One action of a tool the platform's proxy runs, with the params it takes (the
    proxy refuses a missing required one and any other)."""

    name: str
    side_effect: bool
    risk: Risk
    description: str
    required: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()

    @property
    def params(self) -> tuple[str, ...]:
        return self.required + self.optional


@dataclass(frozen=True)
class Tool:
    """A tool of the platform's proxy (`POST /v1/agent-api/tools/{name}`)."""

    name: str
    description: str
    actions: Mapping[str, Action]


def _tool(name: str, description: str, *actions: Action) -> Tool:
    return Tool(name, description, {a.name: a for a in actions})


TOOL_CATALOG: Mapping[str, Tool] = {
    "shopify": _tool(
        "shopify",
        "Shopify Admin API of the org's store",
        Action(
            "listOrders",
            False,
            Risk.LOW,
            "List orders; status open|closed|cancelled|any, created_at_min/max ISO 8601",
            optional=("status", "created_at_min", "created_at_max", "limit"),
        ),
        Action("getOrder", False, Risk.LOW, "One order by numeric id", required=("id",)),
        Action(
            "listProducts",
            False,
            Risk.LOW,
            "List products with their variants (sku, inventory_item_id)",
            optional=("ids", "limit"),
        ),
        Action(
            "getInventoryLevels",
            False,
            Risk.LOW,
            "Inventory levels of inventory_item_ids and/or location_ids (lists of ids)",
            optional=("inventory_item_ids", "location_ids"),
        ),
        Action(
            "setInventoryLevel",
            True,
            Risk.HIGH,
            "Set the available quantity of an inventory item at a location",
            required=("location_id", "inventory_item_id", "available"),
        ),
        Action(
            "adjustInventoryLevel",
            True,
            Risk.HIGH,
            "Change the available quantity of an inventory item at a location by a non-zero amount",
            required=("location_id", "inventory_item_id", "available_adjustment"),
        ),
    ),
    "amazon": _tool(
        "amazon",
        "Amazon Selling Partner API of the org's seller account",
        Action(
            "listOrders",
            False,
            Risk.LOW,
            "Orders created in a period; CreatedAfter (required), CreatedBefore ISO 8601",
            required=("CreatedAfter",),
            optional=("CreatedBefore", "OrderStatuses", "MarketplaceIds"),
        ),
        Action("getOrder", False, Risk.LOW, "One order", required=("orderId",)),
        Action(
            "getOrderItems",
            False,
            Risk.LOW,
            "An order's items with SellerSKU and QuantityOrdered",
            required=("orderId",),
        ),
        Action(
            "updateListingQuantity",
            True,
            Risk.HIGH,
            "Set the quantity a seller-fulfilled listing offers (sku, quantity >= 0)",
            required=("sku", "quantity"),
            optional=("sellerId", "productType", "MarketplaceIds"),
        ),
    ),
}
"""Every tool and action the platform's tool proxy accepts (platform_api/tools/upstreams)."""

TOOL_ALIASES: Mapping[str, str] = {"shopify_query": "shopify", "amazon_query": "amazon"}
"""The seeds' tool names (`shopify_query`) for the proxy's (`shopify`)."""


def tool_name(name: str) -> str:
    """The proxy's name of a tool, whatever spelling the configuration or a model used."""
    key = name.strip().lower()
    return TOOL_ALIASES.get(key, key)


def find_action(tool: str | None, action: str | None) -> Action | None:
    """The catalogue entry of `tool`.`action`, or None when unknown."""
    if tool is None or action is None:
        return None
    entry = TOOL_CATALOG.get(tool_name(tool))
    return entry.actions.get(action) if entry else None


def enabled_tools(configured: Iterable[str]) -> tuple[str, ...]:
    """The proxy's names of the configured tools (all known tools when none are listed)."""
    names = sorted({tool_name(t) for t in configured})
    return tuple(names) if names else tuple(sorted(TOOL_CATALOG))


# --- risk ------------------------------------------------------------------------------------

_RISK_WORDS: tuple[tuple[Risk, tuple[str, ...]], ...] = (
    (
        Risk.CRITICAL,
        (
            "refund",
            "delete",
            "remove",
            "destroy",
            "purge",
            "wipe",
            "drop",
            "erase",
            "terminate",
            "cancel order",
            "cancel the order",
            "void",
            "payment",
            "pay",
            "paid",
            "charge",
            "payout",
            "transfer",
            "wire",
            "chargeback",
            "invoice",
            "tax",
            "compliance",
            "gdpr",
            "legal",
            "close account",
        ),
    ),
    (
        Risk.HIGH,
        (
            "update",
            "set",
            "adjust",
            "modify",
            "change",
            "overwrite",
            "replace",
            "write",
            "publish",
            "send",
            "email",
            "deploy",
            "fulfil",
            "fulfill",
            "price",
            "bulk",
            "import",
            "sync",
        ),
    ),
    (
        Risk.MEDIUM,
        (
            "create",
            "add",
            "draft",
            "tag",
            "label",
            "note",
            "comment",
            "save",
            "upload",
            "schedule",
            "archive",
        ),
    ),
)
"""Words of each risk level above low; anything else (list, get, fetch, read, query,
search, count, compare, report, summarise...) is read-only: low."""

_RISK_PATTERNS = tuple((risk, tuple(_phrase(w) for w in words)) for risk, words in _RISK_WORDS)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _words(text: str) -> str:
    return _CAMEL.sub(" ", text)


def risk_of_text(text: str) -> Risk:
    """The risk the words of `text` suggest (action names like setInventoryLevel count
    as words: "set inventory level")."""
    spaced = _words(text)
    for risk, patterns in _RISK_PATTERNS:
        if any(p.search(spaced) for p in patterns):
            return risk
    return Risk.LOW


def highest(*risks: Risk | None) -> Risk:
    """The highest of the given levels (low when none)."""
    present = [r for r in risks if r is not None]
    return max(present, key=lambda r: r.rank) if present else Risk.LOW


def classify_step(
    tool: str | None,
    action: str | None,
    description: str,
    override: Risk | str | None = None,
) -> Risk:
    """The risk of a step.

    Without `override`: the highest of the catalogue's level for the action (an unknown
    action counts by its name's words) and of the description's words; a known read-only
    action keeps its own level, so a description that merely mentions a later write
    ("fetch orders to update inventory") does not raise it.

    With `override` (a language model's judgement): that level, except that a
    side-effecting action is never below medium.
    """
    known = find_action(tool, action)
    if override is not None:
        chosen = Risk(str(override).lower())
        if known is not None and known.side_effect:
            return highest(chosen, Risk.MEDIUM)
        if known is None and action and risk_of_text(action) is not Risk.LOW:
            return highest(chosen, Risk.MEDIUM)
        return chosen
    if known is not None and not known.side_effect:
        return known.risk
    return highest(
        known.risk if known else None,
        risk_of_text(action) if action else None,
        risk_of_text(description),
    )


def risk_of_message(message: str) -> Risk:
    """The risk of what a client message asks for (the `risk_level` of a chat reply)."""
    return risk_of_text(message)
