"""The offline planner: a small grammar of tools, actions and periods that turns a
request into steps with no language model (and deterministically in tests)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from agent_image.dispatch import (
    Mode,
    risk_of_message,
)
from agent_image.planning.config import OFFLINE_MODEL
from agent_image.planning.drafts import Draft, Plan, ToolReader, to_steps, tool_warnings
from agent_image.planning.lookups import resolve
from agent_image.planning.periods import Period, parse_period
from humanwork_core import catalog
from humanwork_core.resources import Risk, StepKind

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


def amazon_period(period: Period | None, now: datetime) -> Period:
    if period is not None:
        return period
    end = now.astimezone(UTC).replace(microsecond=0)
    return Period(end - timedelta(days=30), end, "the last 30 days")


def _clause_steps(
    clause: str, period: Period | None, earlier: list[Draft], now: datetime
) -> list[Draft]:
    lowered = clause.lower()
    amazon = "amazon" in lowered
    shopify = "shopify" in lowered
    if not amazon and not shopify:
        # "... and update inventory for any discrepancies": inventory lives in Shopify
        shopify = bool(re.search(r"\b(inventory|stock|sku)\b", lowered))
    writes = bool(_WRITE_WORDS.search(clause)) or risk_of_message(clause) is not Risk.LOW
    reads = bool(_READ_WORDS.search(clause)) or not writes
    drafts: list[Draft] = []
    if amazon and reads:
        order_id = _AMAZON_ORDER_ID.search(clause)
        if order_id and "item" in lowered:
            drafts.append(
                Draft(
                    f"Fetch the items of Amazon order {order_id[1]} (read-only)",
                    "amazon",
                    "getOrderItems",
                    {"orderId": order_id[1]},
                )
            )
        elif order_id:
            drafts.append(
                Draft(
                    f"Fetch Amazon order {order_id[1]} (read-only)",
                    "amazon",
                    "getOrder",
                    {"orderId": order_id[1]},
                )
            )
        else:
            span = amazon_period(period, now)
            drafts.append(
                Draft(
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
            Draft(
                "No tool of the agent can do this; describe how to proceed, or reject: "
                + clause.strip()[:3500],
                None,
                None,
                kind=StepKind.INPUT,
                risk=risk_of_message(clause),
            )
        )
    return drafts


def _writes(draft: Draft) -> bool:
    action = catalog.find(draft.tool, draft.action)
    return action is not None and action.side_effect


def _inventory_writes(
    clause: str, period: Period | None, earlier: list[Draft], now: datetime
) -> list[Draft]:
    """Inventory changes: the SKUs and quantities the clause names, else a reconciliation
    with the Amazon orders an earlier step lists, else a step for the expert to complete."""
    explicit = _explicit_inventory(clause)
    if explicit is not None:
        return explicit
    source = next((d for d in reversed(earlier) if d.tool == "amazon"), None)
    if source is not None and source.action == "listOrders":
        index = earlier.index(source) + 1
        span = amazon_period(period, now)
        return [
            Draft(
                f"Adjust the Shopify inventory of every SKU whose stock disagrees with "
                f"the Amazon orders created in {span.label} (step {index})",
                "shopify",
                "adjustInventoryLevel",
                reconcile=span,
            )
        ]
    return [
        Draft(
            "Update the Shopify inventory as asked: " + clause.strip()[:1000],
            "shopify",
            "adjustInventoryLevel",
        )
    ]


def _explicit_inventory(clause: str) -> list[Draft] | None:
    """`set SKU X to N` and `adjust SKU X by ±N` of the clause (a change by 0 is none);
    None when the clause names no SKU quantity."""
    sets = [(m[1], int(m[2])) for m in _SKU_SET.finditer(clause)]
    deltas = [(m[1], int(m[2])) for m in _SKU_DELTA.finditer(clause)]
    if not sets and not deltas:
        return None
    drafts = [
        Draft(
            f"Set the available Shopify inventory of SKU {sku} to {qty}",
            "shopify",
            "setInventoryLevel",
            sku=sku,
            quantity=qty,
        )
        for sku, qty in sets
    ]
    drafts += [
        Draft(
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


def _shopify_steps(
    clause: str,
    lowered: str,
    period: Period | None,
    writes: bool,
    earlier: list[Draft],
    now: datetime,
) -> list[Draft]:
    when = f" created in {period.label}" if period else ""
    inventory = "inventory" in lowered or "stock" in lowered or "sku" in lowered
    if writes and inventory:
        return _inventory_writes(clause, period, earlier, now)
    if inventory:
        sku = re.search(r"\bsku\s+([A-Z0-9][A-Z0-9_-]+)", clause, re.I)
        return [
            Draft(
                "Read the Shopify inventory levels" + (f" of SKU {sku[1]}" if sku else ""),
                "shopify",
                "getInventoryLevels",
                sku=sku[1] if sku else None,
            )
        ]
    order_id = _SHOPIFY_ORDER_ID.search(clause)
    if "order" in lowered and order_id:
        return [
            Draft(
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
            Draft(f"Fetch all Shopify orders{when} (read-only)", "shopify", "listOrders", params)
        ]
    if "product" in lowered or "catalog" in lowered:
        return [Draft("List the Shopify products (read-only)", "shopify", "listProducts")]
    return []


def parse_request(text: str, period: Period | None, now: datetime) -> list[Draft]:
    drafts: list[Draft] = []
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
    drafts = parse_request(request, period, now)
    if feedback:
        # the expert's feedback on a rejected plan: its changes replace the plan's
        amended = parse_request(feedback, period, now)
        changes = [d for d in amended if _writes(d)]
        if changes:
            drafts = [d for d in drafts if d.kind is StepKind.ACTION and not _writes(d)]
            drafts += changes
    drafts, notes = await resolve(drafts, reader, now)
    if not drafts:
        drafts.append(
            Draft(
                "The agent has no tool for this request; describe how to proceed: "
                + request.strip()[:3500],
                None,
                None,
                kind=StepKind.INPUT,
                risk=risk_of_message(request),
            )
        )
    steps = to_steps(drafts)
    summary = "; ".join([s.description for s in steps] + notes)
    return Plan(
        steps=steps,
        mode=mode,
        planner="offline",
        model=OFFLINE_MODEL,
        summary=summary[:1000],
        warnings=tool_warnings(steps, tools) + tuple(notes),
    )
