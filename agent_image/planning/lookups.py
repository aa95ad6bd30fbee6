"""Looking things up while planning: read-only tool calls through the platform's proxy
that fill a write step's parameters (SKUs to ids, a reconciliation's exact deltas)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from agent_image.planning.drafts import EDIT_HINT, Draft, ToolReader
from agent_image.planning.periods import Period
from humanwork_core import catalog

LOG = logging.getLogger("humanwork.agent.planner")


# --- looking things up while planning ----------------------------------------------------------


class Lookups:
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


async def resolve_sku(draft: Draft, lookups: Lookups | None) -> list[Draft]:
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


async def reconcile_drafts(
    draft: Draft, lookups: Lookups | None, period: Period, now: datetime
) -> list[Draft]:
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
        orders = await _open_amazon_orders(lookups, period)
        synced = await _synced_order_ids(lookups, period)
        missing, sources = await _missing_units(lookups, orders, synced)
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
        level = Lookups.stock_location(levels.get(item_ids[sku]) or [])
        if level is not None:
            drafts.append(_adjustment(sku, level, item_ids[sku], missing[sku], sources, period))
    return drafts


async def _open_amazon_orders(lookups: Lookups, period: Period) -> list[dict[str, Any]]:
    """The Amazon orders of `period` that hold units."""
    found = await lookups.reader(
        "amazon", "listOrders", {"CreatedAfter": period.after, "CreatedBefore": period.before}
    )
    return [
        o
        for o in found.get("orders") or []
        if str(o.get("OrderStatus") or "") not in _CLOSED_AMAZON
    ]


async def _synced_order_ids(lookups: Lookups, period: Period) -> set[str]:
    """The Amazon order ids the sync app copied into Shopify (note `amazon_order_id`)."""
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
    return {
        str(attribute.get("value"))
        for order in copied.get("orders") or []
        for attribute in order.get("note_attributes") or []
        if attribute.get("name") == "amazon_order_id"
    }


async def _missing_units(
    lookups: Lookups, orders: Sequence[dict[str, Any]], synced: set[str]
) -> tuple[dict[str, int], dict[str, list[str]]]:
    """Per SKU, the units of the orders Shopify has no copy of, and those orders."""
    missing: dict[str, int] = {}
    sources: dict[str, list[str]] = {}
    for order in orders:
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
    return missing, sources


def _adjustment(
    sku: str,
    level: dict[str, Any],
    item_id: int,
    units: int,
    sources: dict[str, list[str]],
    period: Period,
) -> Draft:
    """The `adjustInventoryLevel` that takes `units` off the SKU's stock at `level`."""
    location, available = int(level["location_id"]), int(level.get("available") or 0)
    delta = -units
    return Draft(
        f"Adjust the Shopify stock of SKU {sku} at location {location} by {delta} "
        f"({available} -> {available + delta}): Amazon orders of {period.label} "
        f"missing from Shopify: {', '.join(sources[sku])}",
        "shopify",
        "adjustInventoryLevel",
        {
            "location_id": location,
            "inventory_item_id": item_id,
            "available_adjustment": delta,
        },
    )


async def resolve(
    drafts: list[Draft], reader: ToolReader | None, now: datetime
) -> tuple[list[Draft], list[str]]:
    lookups = Lookups(reader) if reader is not None else None
    out: list[Draft] = []
    notes: list[str] = []
    for draft in drafts:
        if draft.reconcile is not None:
            found = await reconcile_drafts(draft, lookups, draft.reconcile, now)
            if not found:
                notes.append(
                    f"no Shopify inventory differs from the Amazon orders of "
                    f"{draft.reconcile.label}: nothing to update"
                )
            out.extend(found)
        elif draft.sku is not None:
            out.extend(await resolve_sku(draft, lookups))
        else:
            out.append(draft)
    return out, notes
