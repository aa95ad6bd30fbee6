"""The seeded world both fakes share: one merchant selling five SKUs on its Shopify
store and on Amazon (US marketplace), with October 2026 orders.

The story (what `SEED_REQUEST`, "reconcile October 2026's Amazon orders", finds): every
Amazon order is fulfilled from the Shopify warehouse stock, and a sync app copies each Amazon order
into Shopify (`source_name: "amazon"`, tag `amazon`, note attribute
`amazon_order_id`), which is what deducts its units from Shopify's inventory. One
October order, `113-2026100-0000004` (3 x `HW-MUG-001`, still Unshipped), was never
copied: Shopify's warehouse stock of `HW-MUG-001` (inventory item 46100000000001,
location 65000000001) reads 40 where it should read 37. Every other SKU agrees. The
Canceled October order `113-2026100-0000005` was rightly not copied (no units left).
September and November orders lie outside the period (and were copied).

So reconciling ends with exactly one inventory change: `HW-MUG-001` at the warehouse
from 40 to 37 (`adjustInventoryLevel` by -3, or `setInventoryLevel` to 37).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

SHOP_DOMAIN = "acme.myshopify.com"
SHOPIFY_API_VERSION = "2025-01"
MARKETPLACE_ID = "ATVPDKIKX0DER"  # amazon.com
SELLER_ID = "A3HWDEMOSELLER"
CURRENCY = "USD"

WAREHOUSE_LOCATION_ID = 65000000001
STORE_LOCATION_ID = 65000000002
LOCATIONS = {WAREHOUSE_LOCATION_ID: "Main warehouse", STORE_LOCATION_ID: "Retail store"}


@dataclass(frozen=True)
class Sku:
    """One sellable unit, with its ids on both sides."""

    sku: str
    title: str
    product_id: int
    product_title: str
    variant_id: int
    variant_title: str
    inventory_item_id: int
    asin: str
    price: Decimal


SKUS: tuple[Sku, ...] = (
    Sku(
        "HW-MUG-001",
        "Stoneware mug 12 oz",
        8100000000001,
        "Stoneware mug",
        44100000000001,
        "12 oz",
        46100000000001,
        "B0HWMUG001",
        Decimal("18.00"),
    ),
    Sku(
        "HW-TEE-M",
        "Organic cotton tee - M",
        8100000000002,
        "Organic cotton tee",
        44100000000002,
        "M",
        46100000000002,
        "B0HWTEEM02",
        Decimal("24.00"),
    ),
    Sku(
        "HW-TEE-L",
        "Organic cotton tee - L",
        8100000000002,
        "Organic cotton tee",
        44100000000003,
        "L",
        46100000000003,
        "B0HWTEEL03",
        Decimal("24.00"),
    ),
    Sku(
        "HW-TOTE-01",
        "Canvas tote",
        8100000000003,
        "Canvas tote",
        44100000000004,
        "Default Title",
        46100000000004,
        "B0HWTOTE04",
        Decimal("29.00"),
    ),
    Sku(
        "HW-PIN-07",
        "Enamel pin",
        8100000000004,
        "Enamel pin",
        44100000000005,
        "Default Title",
        46100000000005,
        "B0HWPIN007",
        Decimal("9.00"),
    ),
)
BY_SKU = {s.sku: s for s in SKUS}
BY_INVENTORY_ITEM = {s.inventory_item_id: s for s in SKUS}

# Shopify "available" per (inventory item, location), as seeded
INVENTORY: dict[tuple[int, int], int] = {
    (46100000000001, WAREHOUSE_LOCATION_ID): 40,  # HW-MUG-001: should be 37
    (46100000000002, WAREHOUSE_LOCATION_ID): 25,
    (46100000000003, WAREHOUSE_LOCATION_ID): 18,
    (46100000000004, WAREHOUSE_LOCATION_ID): 12,
    (46100000000005, WAREHOUSE_LOCATION_ID): 60,
    (46100000000001, STORE_LOCATION_ID): 5,
    (46100000000004, STORE_LOCATION_ID): 3,
}

# the quantity each Amazon listing offers
AMAZON_LISTINGS: dict[str, int] = {
    "HW-MUG-001": 30,
    "HW-TEE-M": 20,
    "HW-TEE-L": 15,
    "HW-TOTE-01": 10,
    "HW-PIN-07": 0,
}


@dataclass(frozen=True)
class AmazonOrder:
    """A seeded Amazon order and whether the sync app copied it into Shopify."""

    order_id: str
    purchased: datetime
    status: str  # Shipped | Unshipped | Canceled
    items: tuple[tuple[str, int], ...]  # (SKU, quantity)
    in_shopify: bool


def _at(day: str) -> datetime:
    return datetime.fromisoformat(day).replace(tzinfo=UTC)


AMAZON_ORDERS: tuple[AmazonOrder, ...] = (
    AmazonOrder(
        "113-2026090-0000001", _at("2026-09-28T09:12:00"), "Shipped", (("HW-MUG-001", 1),), True
    ),
    AmazonOrder(
        "113-2026100-0000001",
        _at("2026-10-02T14:05:00"),
        "Shipped",
        (("HW-MUG-001", 2), ("HW-TEE-M", 1)),
        True,
    ),
    AmazonOrder(
        "113-2026100-0000002", _at("2026-10-07T08:40:00"), "Shipped", (("HW-TOTE-01", 1),), True
    ),
    AmazonOrder(
        "113-2026100-0000003", _at("2026-10-11T19:22:00"), "Shipped", (("HW-TEE-L", 2),), True
    ),
    AmazonOrder(
        "113-2026100-0000004", _at("2026-10-15T11:03:00"), "Unshipped", (("HW-MUG-001", 3),), False
    ),
    AmazonOrder(
        "113-2026100-0000005", _at("2026-10-19T16:47:00"), "Canceled", (("HW-TOTE-01", 2),), False
    ),
    AmazonOrder(
        "113-2026100-0000006",
        _at("2026-10-23T07:30:00"),
        "Shipped",
        (("HW-TEE-M", 1), ("HW-MUG-001", 1)),
        True,
    ),
    AmazonOrder(
        "113-2026100-0000007", _at("2026-10-30T22:15:00"), "Shipped", (("HW-TOTE-01", 1),), True
    ),
    AmazonOrder(
        "113-2026110-0000001", _at("2026-11-02T10:00:00"), "Shipped", (("HW-TEE-L", 1),), True
    ),
)

# Shopify's own web orders (not Amazon's): (id, created, [(SKU, quantity)])
SHOPIFY_WEB_ORDERS: tuple[tuple[int, datetime, tuple[tuple[str, int], ...]], ...] = (
    (5600000000101, _at("2026-10-05T12:00:00"), (("HW-TEE-M", 2),)),
    (5600000000102, _at("2026-10-21T18:30:00"), (("HW-PIN-07", 4), ("HW-MUG-001", 1))),
)

OCTOBER_START = "2026-10-01T00:00:00Z"
OCTOBER_END = "2026-10-31T23:59:59Z"
PERIOD = "October 2026"
"""The period the seeded orders fill, named with its year: a request that says only
"October" means the latest October begun (October 2027 once it starts), which holds none."""
SEED_REQUEST = (
    f"Reconcile all Amazon orders for {PERIOD} and update inventory in Shopify for any "
    "discrepancies"
)
"""The demo's request (`make demo`, the stack's and the node's tests, the benches): it
names its year, so it plans the same read and write whatever today's date is."""

# the ground truth of the reconciliation
DISCREPANT_SKU = "HW-MUG-001"
UNSYNCED_ORDER_ID = "113-2026100-0000004"
DISCREPANCY = 3  # Shopify's warehouse stock of DISCREPANT_SKU is this much too high


def expected_inventory_after_reconcile() -> dict[tuple[int, int], int]:
    """Every (inventory item, location) -> available once October is reconciled."""
    expected = dict(INVENTORY)
    item = BY_SKU[DISCREPANT_SKU].inventory_item_id
    expected[(item, WAREHOUSE_LOCATION_ID)] -= DISCREPANCY
    return expected


def iso(moment: datetime) -> str:
    """`2026-10-02T14:05:00Z`."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def shopify_iso(moment: datetime) -> str:
    """Shopify's style: `2026-10-02T14:05:00-00:00`."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S-00:00")


def money(amount: Decimal) -> str:
    return f"{amount:.2f}"


def _line_items(order_id: int, items: tuple[tuple[str, int], ...]) -> list[dict[str, Any]]:
    lines = []
    for index, (code, quantity) in enumerate(items, start=1):
        sku = BY_SKU[code]
        lines.append(
            {
                "id": order_id * 10 + index,
                "sku": sku.sku,
                "title": sku.product_title,
                "variant_title": sku.variant_title,
                "name": sku.title,
                "quantity": quantity,
                "price": money(sku.price),
                "product_id": sku.product_id,
                "variant_id": sku.variant_id,
                "fulfillable_quantity": 0,
            }
        )
    return lines


def shopify_orders() -> list[dict[str, Any]]:
    """The Shopify orders: the copies of the synced Amazon orders and the web orders."""
    orders: list[dict[str, Any]] = []
    number = 1001
    for index, amazon in enumerate(o for o in AMAZON_ORDERS if o.in_shopify):
        order_id = 5600000000001 + index
        created = amazon.purchased + timedelta(minutes=2)
        orders.append(
            _shopify_order(order_id, number, created, amazon.items, source="amazon")
            | {
                "tags": "amazon",
                "note_attributes": [{"name": "amazon_order_id", "value": amazon.order_id}],
            }
        )
        number += 1
    for order_id, created, items in SHOPIFY_WEB_ORDERS:
        orders.append(_shopify_order(order_id, number, created, items, source="web"))
        number += 1
    return sorted(orders, key=lambda o: o["id"])


def _shopify_order(
    order_id: int, number: int, created: datetime, items: tuple[tuple[str, int], ...], source: str
) -> dict[str, Any]:
    total = sum((BY_SKU[c].price * q for c, q in items), Decimal(0))
    return {
        "id": order_id,
        "admin_graphql_api_id": f"gid://shopify/Order/{order_id}",
        "name": f"#{number}",
        "order_number": number,
        "created_at": shopify_iso(created),
        "updated_at": shopify_iso(created + timedelta(days=3)),
        "processed_at": shopify_iso(created),
        "closed_at": shopify_iso(created + timedelta(days=3)),
        "cancelled_at": None,
        "currency": CURRENCY,
        "total_price": money(total),
        "subtotal_price": money(total),
        "financial_status": "paid",
        "fulfillment_status": "fulfilled",
        "source_name": source,
        "tags": "",
        "note": None,
        "note_attributes": [],
        "line_items": _line_items(order_id, items),
    }


def shopify_products() -> list[dict[str, Any]]:
    """The Shopify products with their variants (each variant one SKU)."""
    products: dict[int, dict[str, Any]] = {}
    for sku in SKUS:
        product = products.setdefault(
            sku.product_id,
            {
                "id": sku.product_id,
                "admin_graphql_api_id": f"gid://shopify/Product/{sku.product_id}",
                "title": sku.product_title,
                "handle": sku.product_title.lower().replace(" ", "-"),
                "vendor": "Acme",
                "status": "active",
                "created_at": "2026-01-15T10:00:00-00:00",
                "updated_at": "2026-09-01T10:00:00-00:00",
                "variants": [],
            },
        )
        product["variants"].append(
            {
                "id": sku.variant_id,
                "product_id": sku.product_id,
                "title": sku.variant_title,
                "sku": sku.sku,
                "price": money(sku.price),
                "inventory_item_id": sku.inventory_item_id,
                "inventory_management": "shopify",
            }
        )
    return [products[k] for k in sorted(products)]


def amazon_order(order: AmazonOrder) -> dict[str, Any]:
    """The SP-API Orders v0 `Order` of a seeded order."""
    shipped = sum(q for _, q in order.items) if order.status == "Shipped" else 0
    unshipped = sum(q for _, q in order.items) if order.status == "Unshipped" else 0
    body: dict[str, Any] = {
        "AmazonOrderId": order.order_id,
        "PurchaseDate": iso(order.purchased),
        "LastUpdateDate": iso(order.purchased + timedelta(days=1)),
        "OrderStatus": order.status,
        "FulfillmentChannel": "MFN",
        "SalesChannel": "Amazon.com",
        "OrderType": "StandardOrder",
        "MarketplaceId": MARKETPLACE_ID,
        "NumberOfItemsShipped": shipped,
        "NumberOfItemsUnshipped": unshipped,
        "PaymentMethod": "Other",
        "IsPrime": False,
        "IsBusinessOrder": False,
    }
    if order.status != "Canceled":
        total = sum((BY_SKU[c].price * q for c, q in order.items), Decimal(0))
        body["OrderTotal"] = {"CurrencyCode": CURRENCY, "Amount": money(total)}
    return body


def amazon_order_items(order: AmazonOrder) -> list[dict[str, Any]]:
    """The SP-API `OrderItem`s of a seeded order."""
    items = []
    for index, (code, quantity) in enumerate(order.items, start=1):
        sku = BY_SKU[code]
        digits = order.order_id.replace("-", "")[-10:]
        items.append(
            {
                "ASIN": sku.asin,
                "SellerSKU": sku.sku,
                "OrderItemId": f"{digits}{index:04d}",
                "Title": sku.title,
                "QuantityOrdered": quantity,
                "QuantityShipped": quantity if order.status == "Shipped" else 0,
                "ItemPrice": {"CurrencyCode": CURRENCY, "Amount": money(sku.price * quantity)},
            }
        )
    return items
