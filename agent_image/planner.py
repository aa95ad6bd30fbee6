"""The planner and the responder: plans for tasks, draft replies for chat.

Both work with a language model when one is configured and reachable, and OFFLINE
otherwise (no LLM base URL, a reserved never-resolving one such as
`https://llm.example/v1`, or the model failing): the offline planner turns a request into
steps with a small grammar of tools, actions and periods; the offline responder answers
from the expert corrections it was given, or with a templated holding reply that goes to
the expert queue. So the whole system works with no key, and deterministically in tests.

Plans are tuples of :class:`humanwork_core.resources.Step` (the AgenticTask's own model),
with step ids `step-1`, `step-2`, ... and `parameters = {"action": <tool action>,
"params": {...}}`: exactly the body the executor sends to the platform's tool proxy
(`POST /v1/agent-api/tools/{tool}` with `{action, params, idempotencyKey, task, step}`).
The proxy runs a side-effecting action only with the parameters the expert approved, so
the executor never rewrites them.

The write-step convention. A step's params are exactly what the tool proxy will run
(`adjustInventoryLevel` takes `location_id`, `inventory_item_id`, `available_adjustment`;
`setInventoryLevel` takes `location_id`, `inventory_item_id`, `available`), so a write
whose values are not known when planning (the seed's "update inventory in Shopify for any
discrepancies": they are known only once step 1 has read the orders) is planned concrete
in tool and action, high risk, with EMPTY params and a description telling the expert to
fill them in: the expert approves it with an `edit` decision carrying the exact params
(what step 1 found), and the proxy runs exactly those. Nothing touches a store before an
expert approves a step.

With `planningLookups: true` in the configuration (`POST /v1/configure`), the planner
instead works the values out while planning through read-only tool calls (reads need no
approval at the proxy): SKUs named in the request are looked up (listProducts,
getInventoryLevels), and a reconciliation of Amazon orders with Shopify inventory
becomes one `adjustInventoryLevel` per SKU that differs, with its params filled in.
"""

from __future__ import annotations

import calendar
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import ValidationError

from agent_image.corrections import CorrectionStore, Match
from agent_image.dispatch import (
    Mode,
    choose_mode,
    classify_step,
    enabled_tools,
    risk_of_message,
)
from agent_image.llm import Completion, Delta, LLMClient, LLMError
from humanwork_core import catalog
from humanwork_core.resources import Risk, Step, StepKind

LOG = logging.getLogger("humanwork.agent.planner")

OFFLINE_MODEL = "offline"
"""The `model` reported for answers of the offline planner and responder."""

CORRECTION_MATCH = 0.5
"""How close (word overlap) a correction must be for the offline responder to reuse it."""

MAX_DESCRIPTION = 4096


# --- the effective configuration -------------------------------------------------------------


@dataclass(frozen=True)
class AgentConfig:
    """A typed view of the agent's effective configuration (`config.json` from the
    ConfigMap, with the platform's `POST /v1/configure` overlay on top). Accepts the
    operator's camelCase keys and the seed's snake_case ones."""

    data: Mapping[str, Any]
    config_hash: str = ""
    default_mode_env: str | None = None

    def _get(self, *names: str, within: Mapping[str, Any] | None = None) -> Any:
        source = self.data if within is None else within
        for name in names:
            if name in source and source[name] is not None:
                return source[name]
        return None

    @property
    def specialist(self) -> Mapping[str, Any]:
        value = self._get("specialist")
        return value if isinstance(value, Mapping) else {}

    @property
    def specialist_name(self) -> str:
        return str(self._get("name", within=self.specialist) or "the assistant")

    @property
    def system_prompt(self) -> str:
        prompt = self._get("systemPrompt", "system_prompt", within=self.specialist)
        return str(prompt or f"You are {self.specialist_name}, an operations specialist.")

    @property
    def model(self) -> str:
        return str(self._get("model") or "")

    @property
    def temperature(self) -> float | None:
        value = self._get("temperature")
        return float(value) if isinstance(value, int | float) else None

    @property
    def confidence_threshold(self) -> float:
        """0 to 1 (the configuration says 0 to 100; a value of at most 1 is a fraction)."""
        value = self._get("confidenceThreshold", "confidence_threshold")
        if not isinstance(value, int | float):
            return 0.7
        return float(value) if value <= 1 else float(value) / 100

    @property
    def enabled_tools(self) -> tuple[str, ...]:
        value = self._get("enabledTools", "enabled_tools")
        return tuple(str(v) for v in value) if isinstance(value, list | tuple) else ()

    @property
    def tools(self) -> tuple[str, ...]:
        """The proxy's names of the enabled tools (every known one when none is listed)."""
        return enabled_tools(self.enabled_tools)

    @property
    def max_concurrent_tasks(self) -> int:
        value = self._get("maxConcurrentTasks", "max_concurrent_tasks")
        return int(value) if isinstance(value, int) and value > 0 else 3

    @property
    def planning_lookups(self) -> bool:
        """Whether the planner may make read-only tool calls while planning."""
        return self._get("planningLookups", "planning_lookups") is True

    @property
    def default_mode(self) -> str | None:
        value = self._get("defaultMode", "default_mode")
        return str(value) if value else self.default_mode_env


class LLMGate:
    """Whether to try the language model: there is one, and it did not just fail.

    After a failure the agent works offline for `cooldown` seconds instead of making
    every request wait for retries against a dead endpoint."""

    def __init__(self, llm: LLMClient | None, cooldown: float = 30.0) -> None:
        self.llm = llm
        self.cooldown = cooldown
        self._down_until = 0.0
        self.last_error: str | None = None

    def usable(self) -> LLMClient | None:
        if self.llm is None or time.monotonic() < self._down_until:
            return None
        return self.llm

    def failed(self, error: Exception) -> None:
        self.last_error = str(error)
        self._down_until = time.monotonic() + self.cooldown
        LOG.warning("language model unavailable, offline for %.0fs: %s", self.cooldown, error)

    def succeeded(self) -> None:
        self.last_error = None


AuditHook = Callable[[Completion, str], Awaitable[None]]
"""Called after every model call with the completion and its purpose (plan, chat, ...)."""


async def _no_audit(_: Completion, __: str) -> None:
    return None


# --- plans -----------------------------------------------------------------------------------


class PlanError(ValueError):
    """A proposed plan does not fit the AgenticTask step model or the tool catalogue."""


@dataclass(frozen=True)
class Plan:
    """The steps for a request, and how they were made."""

    steps: tuple[Step, ...]
    mode: Mode
    planner: str
    """`offline` or `llm`."""
    model: str
    summary: str = ""
    warnings: tuple[str, ...] = ()

    def wire_steps(self) -> list[dict[str, Any]]:
        return [step.to_wire() for step in self.steps]


MONTHS = {name.lower(): index for index, name in enumerate(calendar.month_name) if name}
MONTHS |= {name.lower(): index for index, name in enumerate(calendar.month_abbr) if name}
MONTHS["sept"] = 9
_MONTH_WORDS = "|".join(sorted(MONTHS, key=len, reverse=True))
_MONTH_YEAR = re.compile(rf"\b({_MONTH_WORDS})\.?(?:\s+|\s*,\s*)(\d{{4}})\b", re.I)
_MONTH_CONTEXT = re.compile(
    rf"\b(?:for|in|of|during|from|since|throughout)\s+(?:the\s+month\s+of\s+)?"
    rf"({_MONTH_WORDS})\b\.?",
    re.I,
)
_MONTH_BARE = re.compile(
    r"\b(" + "|".join(w for w in sorted(MONTHS, key=len, reverse=True) if w != "may") + r")\b",
    re.I,
)
_YEAR = re.compile(r"\b(20\d{2})\b")
_LAST_DAYS = re.compile(r"\b(?:last|past)\s+(\d{1,3})\s+days?\b", re.I)
_SKU_SET = re.compile(
    r"\b(?:sku\s*)?([A-Z0-9][A-Z0-9_-]*\d[A-Z0-9_-]*|[A-Z0-9]*[A-Z][A-Z0-9_-]*-[A-Z0-9_-]+)"
    r"\s+(?:to|=|at)\s+(\d{1,9})\b",
    re.I,
)
_SKU_DELTA = re.compile(
    r"\b(?:sku\s*)?([A-Z0-9][A-Z0-9_-]*\d[A-Z0-9_-]*|[A-Z0-9]*[A-Z][A-Z0-9_-]*-[A-Z0-9_-]+)"
    r"\s+by\s+([+-]?\d{1,9})\b",
    re.I,
)
_AMAZON_ORDER_ID = re.compile(r"\b(\d{3}-\d{7}-\d{7})\b")
_SHOPIFY_ORDER_ID = re.compile(r"(?:order\s*(?:#|no\.?|number)?\s*#?)(\d{3,15})\b", re.I)
_CLAUSES = re.compile(r"\s*(?:;|\.\s+|,?\s+and\s+then\s+|,?\s+then\s+|,?\s+and\s+)\s*", re.I)

_READ_WORDS = re.compile(
    r"\b(reconcil\w*|fetch\w*|list\w*|get\w*|pull\w*|read\w*|check\w*|compar\w*|review\w*|"
    r"find\w*|show\w*|look\w*|count\w*|export\w*|report\w*|audit\w*|analy[sz]\w*|summari[sz]\w*)\b",
    re.I,
)
_WRITE_WORDS = re.compile(
    r"\b(updat\w*|set\b|sets\b|setting\b|adjust\w*|sync\w*|correct\w*|fix\w*|chang\w*|"
    r"modif\w*|restock\w*|increas\w*|decreas\w*|reduc\w*)",
    re.I,
)


@dataclass(frozen=True)
class Period:
    """A half-open time range [start, end) named by a request."""

    start: datetime
    end: datetime
    label: str

    @staticmethod
    def _iso(value: datetime) -> str:
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    @property
    def after(self) -> str:
        return self._iso(self.start)

    @property
    def before(self) -> str:
        return self._iso(self.end)


def _month(year: int, month: int) -> Period:
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
    return Period(start, end, f"{calendar.month_name[month]} {year}")


def parse_period(text: str, now: datetime, *, loose: bool = False) -> Period | None:
    """The period a request names: "October" (this year), "October 2025", "last month",
    "this month", "last 30 days"; None when it names none. A month needs "for", "in",
    "of"... before it unless `loose` (feedback such as "Only September, please"); "may"
    never counts alone."""
    found = _MONTH_YEAR.search(text)
    if found:
        return _month(int(found.group(2)), MONTHS[found.group(1).lower()])
    found = _MONTH_CONTEXT.search(text)
    if found is None and loose:
        found = _MONTH_BARE.search(text)
    if found:
        year_found = _YEAR.search(text)
        year = int(year_found.group(1)) if year_found else now.year
        return _month(year, MONTHS[found.group(1).lower()])
    lowered = text.lower()
    if "last month" in lowered or "previous month" in lowered:
        first = now.replace(day=1)
        previous = first - timedelta(days=1)
        return _month(previous.year, previous.month)
    if "this month" in lowered:
        return _month(now.year, now.month)
    days = _LAST_DAYS.search(text)
    if days:
        end = now.astimezone(UTC).replace(microsecond=0)
        return Period(end - timedelta(days=int(days.group(1))), end, f"the last {days[1]} days")
    return None


ToolReader = Callable[[str, str, dict[str, Any]], Awaitable[dict[str, Any]]]
"""A read-only tool call through the platform's proxy while planning: (tool, action,
params) -> the tool's result; raises when the call fails."""

EDIT_HINT = (
    " Its values are known only from what earlier steps find: EDIT this step's parameters "
    "({params}) when approving it."
)


@dataclass
class _Draft:
    description: str
    tool: str | None
    action: str | None
    params: dict[str, Any] = field(default_factory=dict)
    kind: StepKind = StepKind.ACTION
    options: tuple[str, ...] | None = None
    risk: Risk | None = None
    sku: str | None = None
    """A Shopify write or read named by SKU: its ids are looked up while planning."""
    quantity: int | None = None
    reconcile: Period | None = None
    """A Shopify inventory reconciliation against the Amazon orders of this period."""


def _amazon_period(period: Period | None, now: datetime) -> Period:
    if period is not None:
        return period
    end = now.astimezone(UTC).replace(microsecond=0)
    return Period(end - timedelta(days=30), end, "the last 30 days")


def _clause_steps(
    clause: str, period: Period | None, earlier: list[_Draft], now: datetime
) -> list[_Draft]:
    lowered = clause.lower()
    amazon = "amazon" in lowered
    shopify = "shopify" in lowered
    if not amazon and not shopify:
        # "... and update inventory for any discrepancies": inventory lives in Shopify
        shopify = bool(re.search(r"\b(inventory|stock|sku)\b", lowered))
    writes = bool(_WRITE_WORDS.search(clause)) or risk_of_message(clause) is not Risk.LOW
    reads = bool(_READ_WORDS.search(clause)) or not writes
    drafts: list[_Draft] = []
    if amazon and reads:
        order_id = _AMAZON_ORDER_ID.search(clause)
        if order_id and "item" in lowered:
            drafts.append(
                _Draft(
                    f"Fetch the items of Amazon order {order_id[1]} (read-only)",
                    "amazon",
                    "getOrderItems",
                    {"orderId": order_id[1]},
                )
            )
        elif order_id:
            drafts.append(
                _Draft(
                    f"Fetch Amazon order {order_id[1]} (read-only)",
                    "amazon",
                    "getOrder",
                    {"orderId": order_id[1]},
                )
            )
        else:
            span = _amazon_period(period, now)
            drafts.append(
                _Draft(
                    f"Fetch all Amazon orders created in {span.label} (read-only)",
                    "amazon",
                    "listOrders",
                    {"CreatedAfter": span.after, "CreatedBefore": span.before},
                )
            )
    if shopify:
        drafts.extend(_shopify_steps(clause, lowered, period, writes, earlier + drafts, now))
    if writes and not any(_writes(d) for d in drafts):
        # a change no tool of the catalogue makes: the expert says how to go on
        drafts.append(
            _Draft(
                "No tool of the agent can do this; describe how to proceed, or reject: "
                + clause.strip()[:3500],
                None,
                None,
                kind=StepKind.INPUT,
                risk=risk_of_message(clause),
            )
        )
    return drafts


def _writes(draft: _Draft) -> bool:
    action = catalog.find(draft.tool, draft.action)
    return action is not None and action.side_effect


def _shopify_steps(
    clause: str,
    lowered: str,
    period: Period | None,
    writes: bool,
    earlier: list[_Draft],
    now: datetime,
) -> list[_Draft]:
    when = f" created in {period.label}" if period else ""
    inventory = "inventory" in lowered or "stock" in lowered or "sku" in lowered
    if writes and inventory:
        sets = [(m[1], int(m[2])) for m in _SKU_SET.finditer(clause)]
        deltas = [(m[1], int(m[2])) for m in _SKU_DELTA.finditer(clause)]
        if sets or deltas:
            drafts = [
                _Draft(
                    f"Set the available Shopify inventory of SKU {sku} to {qty}",
                    "shopify",
                    "setInventoryLevel",
                    sku=sku,
                    quantity=qty,
                )
                for sku, qty in sets
            ]
            drafts += [
                _Draft(
                    f"Adjust the available Shopify inventory of SKU {sku} by {qty:+d}",
                    "shopify",
                    "adjustInventoryLevel",
                    sku=sku,
                    quantity=qty,
                )
                for sku, qty in deltas
                if qty != 0
            ]
            return drafts
        source = next((d for d in reversed(earlier) if d.tool == "amazon"), None)
        if source is not None and source.action == "listOrders":
            index = earlier.index(source) + 1
            span = _amazon_period(period, now)
            return [
                _Draft(
                    f"Adjust the Shopify inventory of every SKU whose stock disagrees with "
                    f"the Amazon orders created in {span.label} (step {index})",
                    "shopify",
                    "adjustInventoryLevel",
                    reconcile=span,
                )
            ]
        return [
            _Draft(
                "Update the Shopify inventory as asked: " + clause.strip()[:1000],
                "shopify",
                "adjustInventoryLevel",
            )
        ]
    if inventory:
        sku = re.search(r"\bsku\s+([A-Z0-9][A-Z0-9_-]+)", clause, re.I)
        return [
            _Draft(
                "Read the Shopify inventory levels" + (f" of SKU {sku[1]}" if sku else ""),
                "shopify",
                "getInventoryLevels",
                sku=sku[1] if sku else None,
            )
        ]
    order_id = _SHOPIFY_ORDER_ID.search(clause)
    if "order" in lowered and order_id:
        return [
            _Draft(
                f"Fetch Shopify order {order_id[1]} (read-only)",
                "shopify",
                "getOrder",
                {"id": order_id[1]},
            )
        ]
    if "order" in lowered:
        params: dict[str, Any] = {"status": "any"}
        if period:
            params |= {"created_at_min": period.after, "created_at_max": period.before}
        return [
            _Draft(f"Fetch all Shopify orders{when} (read-only)", "shopify", "listOrders", params)
        ]
    if "product" in lowered or "catalog" in lowered:
        return [_Draft("List the Shopify products (read-only)", "shopify", "listProducts")]
    return []


# --- looking things up while planning ----------------------------------------------------------


class _Lookups:
    """Read-only facts fetched through the platform while planning, each fetched once."""

    def __init__(self, reader: ToolReader) -> None:
        self.reader = reader
        self._variants: dict[str, dict[str, Any]] | None = None

    async def variants(self) -> dict[str, dict[str, Any]]:
        """SKU -> its Shopify variant (inventory_item_id, title)."""
        if self._variants is None:
            result = await self.reader("shopify", "listProducts", {})
            found: dict[str, dict[str, Any]] = {}
            for product in result.get("products") or []:
                for variant in product.get("variants") or []:
                    if variant.get("sku") and variant.get("inventory_item_id"):
                        found[str(variant["sku"])] = {**variant, "product": product.get("title")}
            self._variants = found
        return self._variants

    async def levels(self, item_ids: Sequence[int]) -> dict[int, list[dict[str, Any]]]:
        """inventory_item_id -> its levels (location_id, available)."""
        out: dict[int, list[dict[str, Any]]] = {int(i): [] for i in item_ids}
        ids = [str(i) for i in item_ids]
        for start in range(0, len(ids), 50):
            result = await self.reader(
                "shopify", "getInventoryLevels", {"inventory_item_ids": ids[start : start + 50]}
            )
            for level in result.get("inventory_levels") or []:
                out.setdefault(int(level["inventory_item_id"]), []).append(level)
        return out

    @staticmethod
    def stock_location(levels: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
        """The location an item ships from: the one that holds most of its stock."""
        return max(levels, key=lambda lv: int(lv.get("available") or 0), default=None)

    async def item(self, sku: str) -> tuple[int, dict[str, Any]]:
        """A SKU's inventory item id and its stock location's level; LookupError if none."""
        variant = (await self.variants()).get(sku)
        if variant is None:
            raise LookupError(f"no Shopify variant has SKU {sku}")
        item_id = int(variant["inventory_item_id"])
        level = self.stock_location((await self.levels([item_id]))[item_id])
        if level is None:
            raise LookupError(f"SKU {sku} is stocked at no Shopify location")
        return item_id, level


async def _resolve_sku(draft: _Draft, lookups: _Lookups | None) -> list[_Draft]:
    """Fill a SKU-named Shopify step with the ids the proxy needs."""
    assert draft.sku is not None
    required = catalog.find(draft.tool, draft.action)
    names = ", ".join(required.required) if required else ""
    try:
        if lookups is None:
            raise LookupError("planning lookups are off")
        item_id, level = await lookups.item(draft.sku)
    except Exception as exc:  # any failure: the expert completes the step
        LOG.info("cannot look SKU %s up while planning: %s", draft.sku, exc)
        if draft.action == "getInventoryLevels":
            draft.params = {}
        draft.description += EDIT_HINT.format(params=names or "inventory_item_ids")
        return [draft]
    location = int(level["location_id"])
    available = int(level.get("available") or 0)
    if draft.action == "getInventoryLevels":
        draft.params = {"inventory_item_ids": [str(item_id)]}
    elif draft.action == "setInventoryLevel":
        draft.params = {
            "location_id": location,
            "inventory_item_id": item_id,
            "available": draft.quantity,
        }
        draft.description += f" at location {location} (now {available})"
    else:
        draft.params = {
            "location_id": location,
            "inventory_item_id": item_id,
            "available_adjustment": draft.quantity,
        }
        draft.description += (
            f" at location {location} ({available} -> {available + int(draft.quantity or 0)})"
        )
    return [draft]


_CLOSED_AMAZON = frozenset({"Canceled", "Unfulfillable", "Pending", "PendingAvailability"})
"""Amazon order states that hold no units (Pending ones are not yet charged or reserved)."""


async def _reconcile(
    draft: _Draft, lookups: _Lookups | None, period: Period, now: datetime
) -> list[_Draft]:
    """The Shopify inventory changes that reconcile the Amazon orders of `period`.

    Every Amazon order is fulfilled from Shopify's stock, and a sync app copies it into
    Shopify (note attribute `amazon_order_id`), which deducts its units there. An Amazon
    order holding units (not canceled) that has no copy in Shopify therefore left
    Shopify's stock too high by its quantities: one `adjustInventoryLevel` per SKU, at
    the location that holds the SKU's stock, by minus the missing units. Without the
    platform (or when a read fails) the step stays for the expert to complete.
    """
    try:
        if lookups is None:
            raise LookupError("planning lookups are off")
        found = await lookups.reader(
            "amazon", "listOrders", {"CreatedAfter": period.after, "CreatedBefore": period.before}
        )
        amazon_orders = [
            o
            for o in found.get("orders") or []
            if str(o.get("OrderStatus") or "") not in _CLOSED_AMAZON
        ]
        copied = await lookups.reader(
            "shopify",
            "listOrders",
            {
                "status": "any",
                "created_at_min": period.after,
                # copies are made shortly after the Amazon order: look a week past the end
                "created_at_max": Period._iso(period.end + timedelta(days=7)),
            },
        )
        synced = {
            str(attribute.get("value"))
            for order in copied.get("orders") or []
            for attribute in order.get("note_attributes") or []
            if attribute.get("name") == "amazon_order_id"
        }
        missing: dict[str, int] = {}
        sources: dict[str, list[str]] = {}
        for order in amazon_orders:
            order_id = str(order.get("AmazonOrderId") or "")
            if not order_id or order_id in synced:
                continue
            items = await lookups.reader("amazon", "getOrderItems", {"orderId": order_id})
            for item in items.get("orderItems") or []:
                sku = str(item.get("SellerSKU") or "")
                quantity = int(item.get("QuantityOrdered") or 0)
                if sku and quantity:
                    missing[sku] = missing.get(sku, 0) + quantity
                    sources.setdefault(sku, []).append(f"{order_id} ({quantity})")
        if not missing:
            return []
        variants = await lookups.variants()
        unknown = sorted(s for s in missing if s not in variants)
        if unknown:
            raise LookupError(f"SKUs unknown to Shopify: {', '.join(unknown)}")
        item_ids = {sku: int(variants[sku]["inventory_item_id"]) for sku in missing}
        levels = await lookups.levels(sorted(item_ids.values()))
    except Exception as exc:  # any failure: the expert completes the step
        LOG.info("cannot reconcile while planning: %s", exc)
        draft.description += EDIT_HINT.format(
            params="location_id, inventory_item_id, available_adjustment"
        )
        return [draft]
    drafts = []
    for sku in sorted(missing):
        level = _Lookups.stock_location(levels.get(item_ids[sku]) or [])
        if level is None:
            continue
        location, available = int(level["location_id"]), int(level.get("available") or 0)
        delta = -missing[sku]
        drafts.append(
            _Draft(
                f"Adjust the Shopify stock of SKU {sku} at location {location} by {delta} "
                f"({available} -> {available + delta}): Amazon orders of {period.label} "
                f"missing from Shopify: {', '.join(sources[sku])}",
                "shopify",
                "adjustInventoryLevel",
                {
                    "location_id": location,
                    "inventory_item_id": item_ids[sku],
                    "available_adjustment": delta,
                },
            )
        )
    return drafts


async def _resolve(
    drafts: list[_Draft], reader: ToolReader | None, now: datetime
) -> tuple[list[_Draft], list[str]]:
    lookups = _Lookups(reader) if reader is not None else None
    out: list[_Draft] = []
    notes: list[str] = []
    for draft in drafts:
        if draft.reconcile is not None:
            found = await _reconcile(draft, lookups, draft.reconcile, now)
            if not found:
                notes.append(
                    f"no Shopify inventory differs from the Amazon orders of "
                    f"{draft.reconcile.label}: nothing to update"
                )
            out.extend(found)
        elif draft.sku is not None:
            out.extend(await _resolve_sku(draft, lookups))
        else:
            out.append(draft)
    return out, notes


def _to_steps(drafts: Sequence[_Draft]) -> tuple[Step, ...]:
    steps: list[Step] = []
    for index, draft in enumerate(drafts, start=1):
        parameters: dict[str, Any] = {}
        if draft.kind is StepKind.ACTION:
            parameters = {"action": draft.action, "params": draft.params}
        elif draft.params:
            parameters = dict(draft.params)
        risk = classify_step(draft.tool, draft.action, draft.description, draft.risk)
        steps.append(
            Step(
                id=f"step-{index}",
                description=draft.description[:MAX_DESCRIPTION],
                kind=draft.kind,
                tool=draft.tool if draft.kind is StepKind.ACTION else None,
                parameters=parameters,
                risk=risk,
                options=draft.options,
            )
        )
    return tuple(steps)


def _tool_warnings(steps: Sequence[Step], tools: Sequence[str]) -> tuple[str, ...]:
    missing = sorted({s.tool for s in steps if s.tool and s.tool not in tools})
    return tuple(
        f"tool {name!r} is not among the agent's enabled tools; the platform refuses it "
        "unless the org and the AgentInstance enable it"
        for name in missing
    )


def _parse(text: str, period: Period | None, now: datetime) -> list[_Draft]:
    drafts: list[_Draft] = []
    for clause in (c for c in _CLAUSES.split(text) if c and c.strip()):
        drafts.extend(_clause_steps(clause, period, drafts, now))
    return drafts


def is_reconciliation(request: str) -> bool:
    """Whether `request` asks to reconcile Amazon orders with Shopify inventory (a
    workflow the offline planner knows better than a generic model plan: it looks the
    discrepancies up and proposes the exact changes)."""
    lowered = request.lower()
    return (
        "amazon" in lowered
        and ("inventory" in lowered or "stock" in lowered)
        and bool(re.search(r"reconcil|discrepanc|mismatch|out of sync", lowered))
    )


async def offline_plan(
    request: str,
    *,
    now: datetime | None = None,
    tools: Sequence[str] = (),
    feedback: str | None = None,
    mode: Mode = Mode.AGENTIC,
    reader: ToolReader | None = None,
) -> Plan:
    """Plan `request` without a language model.

    Each clause ("... and ...", "then", ";") becomes the read or write steps of the tools
    it names (Amazon, Shopify; inventory and stock live in Shopify), with the period the
    request names (a month, with its year or this year; last month; the last N days).
    Writes are concrete: SKUs are looked up (listProducts, getInventoryLevels) through
    `reader`, and a reconciliation of Amazon orders with Shopify inventory is worked out
    while planning (read-only calls need no approval) into one adjustInventoryLevel per
    SKU that differs. When a lookup fails the write step stays with what is known and
    says that the expert must edit its parameters. The `feedback` on a rejected plan is
    planned too: the changes it names replace the request's (its period wins). What
    matches nothing becomes an input step asking the expert.
    """
    now = now or datetime.now(UTC)
    period = (parse_period(feedback, now, loose=True) if feedback else None) or parse_period(
        request, now
    )
    drafts = _parse(request, period, now)
    if feedback:
        # the expert's feedback on a rejected plan: its changes replace the plan's
        amended = _parse(feedback, period, now)
        changes = [d for d in amended if _writes(d)]
        if changes:
            drafts = [d for d in drafts if d.kind is StepKind.ACTION and not _writes(d)]
            drafts += changes
    drafts, notes = await _resolve(drafts, reader, now)
    if not drafts:
        drafts.append(
            _Draft(
                "The agent has no tool for this request; describe how to proceed: "
                + request.strip()[:3500],
                None,
                None,
                kind=StepKind.INPUT,
                risk=risk_of_message(request),
            )
        )
    steps = _to_steps(drafts)
    summary = "; ".join([s.description for s in steps] + notes)
    return Plan(
        steps=steps,
        mode=mode,
        planner="offline",
        model=OFFLINE_MODEL,
        summary=summary[:1000],
        warnings=_tool_warnings(steps, tools) + tuple(notes),
    )


PLAN_FUNCTION = "propose_plan"
PLAN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "summary": {"type": "string"},
        "steps": {
            "type": "array",
            "minItems": 1,
            "maxItems": 20,
            "items": {
                "type": "object",
                "properties": {
                    "description": {"type": "string"},
                    "kind": {"type": "string", "enum": ["action", "input"]},
                    "tool": {"type": "string"},
                    "action": {"type": "string"},
                    "params": {"type": "object"},
                    "risk": {"type": "string", "enum": [r.value for r in Risk]},
                    "options": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["description"],
            },
        },
    },
    "required": ["steps"],
}


def _catalog_text(tools: Sequence[str]) -> str:
    lines = []
    for name in tools:
        tool = catalog.TOOLS.get(name)
        if tool is None:
            continue
        lines.append(f"- tool `{name}` ({tool.description}):")
        for action in tool.actions.values():
            effect = "WRITES (side effect)" if action.side_effect else "read-only"
            params = ", ".join([f"{p} (required)" for p in action.required] + list(action.optional))
            lines.append(
                f"  - `{action.name}` [{effect}]: {action.description}; params: {params or '-'}"
            )
    return "\n".join(lines)


def plan_prompt(config: AgentConfig, request: str, feedback: str | None, now: datetime) -> str:
    return (
        f"{config.system_prompt}\n\n"
        "Break the client's request into the smallest sequence of steps. Every step is "
        "shown to a human expert who approves it before it runs; nothing runs unapproved. "
        f"Call `{PLAN_FUNCTION}` with the steps. An action step names a tool, one of its "
        "actions and that action's params (concrete values: dates as ISO 8601 UTC). Use an "
        "input step (kind input, optionally with options) when the expert must supply "
        "content or choose. Give each step a risk: low (read-only), medium (minor "
        "reversible write), high (significant write), critical (destructive, financial, "
        "compliance). Today is "
        f"{now.date().isoformat()}.\n\nTools:\n{_catalog_text(sorted(catalog.TOOLS))}"
        + (
            f"\n\nThe expert rejected the previous plan with this feedback: {feedback}"
            if feedback
            else ""
        )
    )


def _extract_json(text: str) -> Any:
    stripped = text.strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)```", stripped, re.S)
    if fenced:
        stripped = fenced.group(1).strip()
    start = stripped.find("{")
    end = stripped.rfind("}")
    if start < 0 or end < start:
        raise PlanError("the model's answer holds no JSON object")
    try:
        return json.loads(stripped[start : end + 1])
    except ValueError as exc:
        raise PlanError(f"the model's plan is not JSON: {exc}") from None


def validate_plan(data: Any, *, tools: Sequence[str] = ()) -> tuple[tuple[Step, ...], str]:
    """A model's proposed plan as AgenticTask steps, and its summary; PlanError when it
    does not fit (no steps, an unknown tool or action, a bad shape)."""
    if not isinstance(data, Mapping):
        raise PlanError("a plan is a JSON object")
    raw_steps = data.get("steps")
    if not isinstance(raw_steps, list) or not raw_steps:
        raise PlanError("a plan has at least one step")
    if len(raw_steps) > 50:
        raise PlanError("a plan has at most 50 steps")
    drafts: list[_Draft] = []
    for number, raw in enumerate(raw_steps, start=1):
        if not isinstance(raw, Mapping):
            raise PlanError(f"step {number} is not an object")
        description = str(raw.get("description") or "").strip()
        if not description:
            raise PlanError(f"step {number} has no description")
        kind = StepKind(str(raw.get("kind") or "action").lower())
        given = raw.get("parameters")
        parameters: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
        action = raw.get("action") or parameters.get("action")
        params = raw.get("params", parameters.get("params", {}))
        risk_value = raw.get("risk")
        try:
            risk = Risk(str(risk_value).lower()) if risk_value else None
        except ValueError:
            raise PlanError(f"step {number} has an unknown risk {risk_value!r}") from None
        if kind is StepKind.ACTION:
            tool = catalog.tool_name(str(raw.get("tool") or ""))
            if tool not in catalog.TOOLS:
                raise PlanError(f"step {number} names an unknown tool {raw.get('tool')!r}")
            known = catalog.find(tool, str(action or ""))
            if known is None:
                raise PlanError(f"step {number}: {tool} has no action {action!r}")
            if not isinstance(params, Mapping):
                raise PlanError(f"step {number}: params must be an object")
            unknown = sorted(str(p) for p in params if p not in known.param_names)
            missing = [p for p in known.required if params.get(p) is None]
            if unknown or missing:
                takes = ", ".join(known.param_names) or "no params"
                raise PlanError(
                    f"step {number}: {tool}.{action} takes {takes}"
                    f" (unknown {unknown}, missing {missing})"
                )
            drafts.append(_Draft(description, tool, str(action), dict(params), risk=risk))
        else:
            options = raw.get("options")
            drafts.append(
                _Draft(
                    description,
                    None,
                    None,
                    dict(params) if isinstance(params, Mapping) else {},
                    kind=StepKind.INPUT,
                    options=tuple(str(o) for o in options) if options else None,
                    risk=risk or Risk.LOW,
                )
            )
    try:
        steps = _to_steps(drafts)
    except (ValidationError, ValueError) as exc:
        raise PlanError(f"the plan does not fit the step model: {exc}") from None
    return steps, str(data.get("summary") or "")[:1000]


class Planner:
    """Plans requests: with the language model when usable, offline otherwise (and on
    any failure or unusable answer of the model)."""

    def __init__(
        self, gate: LLMGate, audit: AuditHook = _no_audit, reader: ToolReader | None = None
    ) -> None:
        self.gate = gate
        self.audit = audit
        self.reader = reader

    async def plan(
        self,
        request: str,
        config: AgentConfig,
        *,
        feedback: str | None = None,
        now: datetime | None = None,
    ) -> Plan:
        now = now or datetime.now(UTC)
        mode = choose_mode(request, config.default_mode)
        llm = self.gate.usable()
        reader = self.reader if config.planning_lookups else None
        skill = reader is not None and is_reconciliation(request)
        if llm is not None and config.model and not skill:
            try:
                return await self._llm_plan(llm, request, config, feedback, now, mode)
            except LLMError as exc:
                self.gate.failed(exc)
            except PlanError as exc:
                LOG.warning("the model's plan is unusable, planning offline: %s", exc)
        return await offline_plan(
            request, now=now, tools=config.tools, feedback=feedback, mode=mode, reader=reader
        )

    async def _llm_plan(
        self,
        llm: LLMClient,
        request: str,
        config: AgentConfig,
        feedback: str | None,
        now: datetime,
        mode: Mode,
    ) -> Plan:
        messages = [
            {"role": "system", "content": plan_prompt(config, request, feedback, now)},
            {"role": "user", "content": request},
        ]
        tool = {
            "type": "function",
            "function": {
                "name": PLAN_FUNCTION,
                "description": "Propose the plan of steps for the request.",
                "parameters": PLAN_SCHEMA,
            },
        }
        completion = await llm.complete(
            messages,
            model=config.model,
            temperature=config.temperature,
            tools=[tool],
            tool_choice={"type": "function", "function": {"name": PLAN_FUNCTION}},
        )
        self.gate.succeeded()
        await self.audit(completion, "plan")
        call = next((c for c in completion.tool_calls if c.name == PLAN_FUNCTION), None)
        data = call.arguments if call is not None else _extract_json(completion.content)
        steps, summary = validate_plan(data, tools=config.tools)
        return Plan(
            steps=steps,
            mode=mode,
            planner="llm",
            model=completion.model,
            summary=summary,
            warnings=_tool_warnings(steps, config.tools),
        )


# --- replies ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    """A drafted reply to a client message (seed 002 UC-1)."""

    reply: str
    confidence: float
    risk_level: Risk
    flag_for_review: bool
    model: str
    mode: Mode
    responder: str
    """`offline` or `llm`."""
    usage: dict[str, int] = field(default_factory=dict)
    corrections_used: tuple[str, ...] = ()
    tool_calls: tuple[dict[str, Any], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "reply": self.reply,
            "confidence": round(self.confidence, 3),
            "risk_level": self.risk_level.value,
            "flag_for_review": self.flag_for_review,
            "model": self.model,
            "usage": self.usage,
            "mode": self.mode.value,
            "responder": self.responder,
            "corrections_used": list(self.corrections_used),
            "tool_calls": list(self.tool_calls),
        }


ToolRunner = Callable[[str, str, dict[str, Any]], Awaitable[dict[str, Any]]]
"""Runs a read-only tool call for the chat (tool, action, params) -> result."""


def _flag(confidence: float, risk: Risk, threshold: float) -> bool:
    return confidence < threshold or risk in (Risk.HIGH, Risk.CRITICAL)


def offline_reply(
    message: str, config: AgentConfig, matches: Sequence[Match], mode: Mode, risk: Risk
) -> Reply:
    """The offline responder's whole reply (see :func:`offline_reply_text`)."""
    text, confidence, used = offline_reply_text(message, config, matches, mode)
    return Reply(
        reply=text,
        confidence=confidence,
        risk_level=risk,
        flag_for_review=_flag(confidence, risk, config.confidence_threshold),
        model=OFFLINE_MODEL,
        mode=mode,
        responder="offline",
        corrections_used=used,
    )


def offline_reply_text(
    message: str, config: AgentConfig, matches: Sequence[Match], mode: Mode
) -> tuple[str, float, tuple[str, ...]]:
    """The offline responder: the expert's corrected reply of a close enough correction
    (confidence from its closeness), else a holding reply (confidence 0.3, so that an
    expert reviews it)."""
    best = matches[0] if matches else None
    if best is not None and best.score >= CORRECTION_MATCH:
        confidence = min(0.95, 0.5 + best.score / 2)
        return best.correction.corrected, confidence, (best.correction.id,)
    if mode is Mode.AGENTIC:
        body = (
            "this needs several steps, so I will prepare a plan; an expert approves each "
            "step before anything is changed."
        )
    else:
        body = "I am looking into it and will come back to you shortly with the details."
    text = f"Hi, this is {config.specialist_name}. Thanks for your message: {body}"
    return text, 0.3, ()


def _few_shot(matches: Sequence[Match]) -> list[dict[str, str]]:
    shots: list[dict[str, str]] = []
    for match in reversed(matches):  # closest last, nearest the question
        shots.append({"role": "user", "content": match.correction.message})
        shots.append({"role": "assistant", "content": match.correction.corrected})
    return shots


def chat_functions(tools: Sequence[str]) -> list[dict[str, Any]]:
    """The read-only actions of the enabled tools, as functions for domain mode."""
    functions = []
    for name in tools:
        tool = catalog.TOOLS.get(name)
        for action in tool.actions.values() if tool else ():
            if action.side_effect:
                continue
            functions.append(
                {
                    "type": "function",
                    "function": {
                        "name": f"{name}__{action.name}",
                        "description": f"{tool.description if tool else name}: "
                        f"{action.description}",
                        "parameters": action.json_schema(),
                    },
                }
            )
    return functions


_CONFIDENCE = re.compile(r"\b(10|[1-9])(?:\s*/\s*10)?\b")


class Responder:
    """Draft replies for chat, with the model when usable, offline otherwise."""

    def __init__(
        self,
        gate: LLMGate,
        corrections: CorrectionStore,
        audit: AuditHook = _no_audit,
        tool_runner: ToolRunner | None = None,
    ) -> None:
        self.gate = gate
        self.corrections = corrections
        self.audit = audit
        self.tool_runner = tool_runner

    def _messages(
        self,
        message: str,
        config: AgentConfig,
        history: Sequence[Mapping[str, Any]],
        context: Sequence[str],
        matches: Sequence[Match],
    ) -> list[dict[str, Any]]:
        system = config.system_prompt
        if context:
            system += "\n\nRelevant knowledge of the org:\n" + "\n".join(
                f"- {c[:800]}" for c in context[:5]
            )
        if matches:
            system += "\n\nExperts corrected earlier replies; follow the examples that come next."
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
        messages += _few_shot(matches)
        for item in history[-20:]:
            role = str(item.get("role") or "user")
            content = str(item.get("content") or "")
            if role in ("user", "assistant", "system") and content:
                messages.append({"role": role, "content": content})
        messages.append({"role": "user", "content": message})
        return messages

    async def _confidence(
        self, llm: LLMClient, config: AgentConfig, message: str, reply: str
    ) -> float | None:
        try:
            rated = await llm.complete(
                [
                    {
                        "role": "system",
                        "content": "Rate how confident you are that the reply fully and "
                        "correctly answers the client, from 1 (not at all) to 10 (certain). "
                        "Answer with the number only.",
                    },
                    {"role": "user", "content": f"Client: {message}\n\nReply: {reply}"},
                ],
                model=config.model,
                temperature=0.0,
                max_tokens=5,
            )
        except LLMError as exc:
            LOG.warning("confidence scoring failed: %s", exc)
            return None
        await self.audit(rated, "confidence")
        found = _CONFIDENCE.search(rated.content)
        return int(found.group(1)) / 10 if found else None

    async def _run_tools(self, completion: Completion) -> list[dict[str, Any]]:
        results = []
        for call in completion.tool_calls:
            tool, _, action = call.name.partition("__")
            known = catalog.find(tool, action)
            if known is None or known.side_effect or self.tool_runner is None:
                outcome: dict[str, Any] = {
                    "error": "not available in a chat reply: changes need a task that an "
                    "expert approves"
                }
            else:
                try:
                    outcome = await self.tool_runner(tool, action, dict(call.arguments))
                except Exception as exc:  # any tool failure goes to the model
                    outcome = {"error": str(exc)[:500]}
            results.append({"id": call.id, "tool": tool, "action": action, "result": outcome})
        return results

    async def reply(
        self,
        message: str,
        config: AgentConfig,
        *,
        history: Sequence[Mapping[str, Any]] = (),
        context: Sequence[str] = (),
    ) -> Reply:
        mode = choose_mode(message, config.default_mode)
        risk = risk_of_message(message)
        matches = self.corrections.closest(message)
        llm = self.gate.usable()
        if llm is not None and config.model:
            try:
                return await self._llm_reply(
                    llm, message, config, history, context, matches, mode, risk
                )
            except LLMError as exc:
                self.gate.failed(exc)
        return offline_reply(message, config, matches, mode, risk)

    async def _llm_reply(
        self,
        llm: LLMClient,
        message: str,
        config: AgentConfig,
        history: Sequence[Mapping[str, Any]],
        context: Sequence[str],
        matches: Sequence[Match],
        mode: Mode,
        risk: Risk,
    ) -> Reply:
        messages = self._messages(message, config, history, context, matches)
        functions = chat_functions(config.tools) if mode is Mode.DOMAIN and self.tool_runner else []
        completion = await llm.complete(
            messages, model=config.model, temperature=config.temperature, tools=functions or None
        )
        self.gate.succeeded()
        await self.audit(completion, "chat")
        usage = completion.usage
        calls: list[dict[str, Any]] = []
        if completion.tool_calls:
            calls = await self._run_tools(completion)
            messages.append(
                {
                    "role": "assistant",
                    "content": completion.content or None,
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": c.raw_arguments},
                        }
                        for c in completion.tool_calls
                    ],
                }
            )
            for call in calls:
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": call["id"],
                        "content": json.dumps(call["result"], default=str)[:8000],
                    }
                )
            completion = await llm.complete(
                messages, model=config.model, temperature=config.temperature
            )
            await self.audit(completion, "chat")
            usage = type(usage)(
                usage.prompt_tokens + completion.usage.prompt_tokens,
                usage.completion_tokens + completion.usage.completion_tokens,
                usage.total_tokens + completion.usage.total_tokens,
            )
        confidence = await self._confidence(llm, config, message, completion.content)
        if confidence is None:
            confidence = 0.5
        return Reply(
            reply=completion.content,
            confidence=confidence,
            risk_level=risk,
            flag_for_review=_flag(confidence, risk, config.confidence_threshold),
            model=completion.model,
            mode=mode,
            responder="llm",
            usage=usage.as_dict(),
            corrections_used=tuple(m.correction.id for m in matches),
            tool_calls=tuple({"tool": c["tool"], "action": c["action"]} for c in calls),
        )

    async def stream(
        self,
        message: str,
        config: AgentConfig,
        *,
        history: Sequence[Mapping[str, Any]] = (),
        context: Sequence[str] = (),
    ) -> AsyncIterator[str | Reply]:
        """The reply as text pieces while they are produced, then the whole :class:`Reply`."""
        mode = choose_mode(message, config.default_mode)
        risk = risk_of_message(message)
        matches = self.corrections.closest(message)
        llm = self.gate.usable()
        if llm is not None and config.model:
            messages = self._messages(message, config, history, context, matches)
            final: Completion | None = None
            sent_any = False
            try:
                async for item in llm.stream(
                    messages, model=config.model, temperature=config.temperature
                ):
                    if isinstance(item, Delta):
                        sent_any = True
                        yield item.text
                    else:
                        final = item
            except LLMError as exc:
                self.gate.failed(exc)
                if sent_any:
                    raise
            if final is not None:
                self.gate.succeeded()
                await self.audit(final, "chat")
                confidence = await self._confidence(llm, config, message, final.content)
                confidence = 0.5 if confidence is None else confidence
                yield Reply(
                    reply=final.content,
                    confidence=confidence,
                    risk_level=risk,
                    flag_for_review=_flag(confidence, risk, config.confidence_threshold),
                    model=final.model,
                    mode=mode,
                    responder="llm",
                    usage=final.usage.as_dict(),
                    corrections_used=tuple(m.correction.id for m in matches),
                )
                return
        reply = offline_reply(message, config, matches, mode, risk)
        for piece in re.findall(r"\S+\s*", reply.reply):
            yield piece
        yield reply
