"""The tool proxy's upstream adapters (Shopify Admin API, Amazon SP-API) against the fake
upstreams of `humanwork_dev.fakes`, real HTTP servers on 127.0.0.1: each action's data, side
effects counted once per call, credential errors without credentials, parameter and
action checks before any request, the LWA token exchanged once and reused, retries of
GETs only, and `sanitise`."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from humanwork_core import catalog as action_catalog
from humanwork_core.resources import Risk
from humanwork_dev.fakes import FakeAmazon, FakeShopify, catalog
from platform_api.tools.upstreams import (
    REDACTED,
    AmazonAdapter,
    InvalidParams,
    MissingCredentials,
    ShopifyAdapter,
    UnknownAction,
    UnknownTool,
    UpstreamError,
    adapter_for,
    known_tools,
    sanitise,
)
from platform_api.tools.upstreams.egress import Egress, EgressClient, EgressPolicy

MUG = catalog.BY_SKU["HW-MUG-001"]
WAREHOUSE = catalog.WAREHOUSE_LOCATION_ID
STORE = catalog.STORE_LOCATION_ID
OCTOBER = {"created_at_min": catalog.OCTOBER_START, "created_at_max": catalog.OCTOBER_END}
AMAZON_OCTOBER = {"CreatedAfter": catalog.OCTOBER_START, "CreatedBefore": catalog.OCTOBER_END}
SHOPIFY_TOKEN = "shpat_test-token-5e1f0c2b9a7d4e11"


@pytest.fixture
def shop() -> Iterator[FakeShopify]:
    with FakeShopify(access_token=SHOPIFY_TOKEN) as fake:
        yield fake


@pytest.fixture
def amazon() -> Iterator[FakeAmazon]:
    with FakeAmazon(
        refresh_token="Atzr|refresh-token-for-tests-77aa",
        client_id="amzn1.application-oa2-client.tests0042",
        client_secret="amzn1.oa2-cs.v1.client-secret-for-tests-99",
    ) as fake:
        yield fake


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    # the fakes listen on loopback: allowed here as HUMANWORK_UPSTREAM_ALLOWED_ENDPOINTS would
    egress = Egress(EgressPolicy.parse(["127.0.0.1/32"]))
    async with EgressClient(egress, timeout=10.0) as http:
        yield http


def shopify() -> ShopifyAdapter:
    return ShopifyAdapter(backoff=0.01)


def amazon_adapter() -> AmazonAdapter:
    return AmazonAdapter(backoff=0.01)


async def call(
    adapter: ShopifyAdapter | AmazonAdapter,
    fake: FakeShopify | FakeAmazon,
    client: httpx.AsyncClient,
    action: str,
    params: dict[str, Any] | None = None,
    *,
    key: str = "idem-1",
    **credential_overrides: str,
) -> dict[str, Any]:
    return await adapter.call(
        action,
        params or {},
        fake.credentials(**credential_overrides),
        client=client,
        idempotency_key=key,
    )


def assert_no_secret(error: UpstreamError, *secrets: str) -> None:
    text = f"{error} {error.message} {error.args} {json.dumps(error.to_dict(), default=str)}"
    for secret in secrets:
        assert secret not in text, f"a credential leaked into the error: {text}"


# ---------------------------------------------------------------- registry and errors


def test_known_tools_and_their_adapters() -> None:
    assert known_tools() == ("amazon", "shopify", "web")  # web: issue 15, item 10
    shop_adapter, amazon_one = adapter_for("shopify"), adapter_for("amazon")
    assert isinstance(shop_adapter, ShopifyAdapter) and isinstance(amazon_one, AmazonAdapter)
    assert adapter_for("shopify") is shop_adapter  # one instance: Amazon's token cache lives on
    assert (shop_adapter.tool, shop_adapter.integration_type) == ("shopify", "shopify")
    assert (amazon_one.tool, amazon_one.integration_type) == ("amazon", "amazon")
    assert set(shop_adapter.actions) == {
        "listOrders",
        "getOrder",
        "listProducts",
        "getInventoryLevels",
        "setInventoryLevel",
        "adjustInventoryLevel",
    }
    assert {n for n, s in shop_adapter.actions.items() if s.side_effect} == {
        "setInventoryLevel",
        "adjustInventoryLevel",
    }
    assert set(amazon_one.actions) == {
        "listOrders",
        "getOrder",
        "getOrderItems",
        "updateListingQuantity",
    }
    assert {n for n, s in amazon_one.actions.items() if s.side_effect} == {"updateListingQuantity"}
    spec = shop_adapter.actions["getOrder"]
    assert spec is action_catalog.TOOLS["shopify"].actions["getOrder"]  # one catalog, no copy
    assert spec.required == ("id",) and spec.description and spec.min_risk is Risk.LOW
    tools = action_catalog.TOOLS.values()
    writes = [a for t in tools for a in t.actions.values() if a.side_effect]
    assert writes and all(a.min_risk.rank >= Risk.HIGH.rank for a in writes)


def test_unknown_tool() -> None:
    with pytest.raises(UnknownTool) as caught:
        adapter_for("stripe")
    assert caught.value.code == "unknown_tool" and caught.value.status == 404
    assert caught.value.details["known_tools"] == ["amazon", "shopify", "web"]
    assert caught.value.to_dict()["code"] == "unknown_tool"


def test_error_codes_and_statuses() -> None:
    expected = {
        UpstreamError: ("upstream_error", 502),
        UnknownTool: ("unknown_tool", 404),
        UnknownAction: ("unknown_action", 422),
        InvalidParams: ("invalid_params", 422),
        MissingCredentials: ("integration_missing", 409),
    }
    for kind, (code, status) in expected.items():
        error = kind("x")
        assert (error.code, error.status, error.details) == (code, status, {})
        assert isinstance(error, UpstreamError)
    assert UpstreamError("x", status=504).status == 504


async def test_unknown_action_reaches_no_upstream(
    shop: FakeShopify, client: httpx.AsyncClient
) -> None:
    with pytest.raises(UnknownAction) as caught:
        await call(shopify(), shop, client, "refundOrder", {"id": 1})
    assert caught.value.code == "unknown_action" and caught.value.status == 422
    assert "getOrder" in caught.value.details["known_actions"]
    assert shop.requests == []


@pytest.mark.parametrize(
    ("action", "params", "missing"),
    [
        ("getOrder", {}, ["id"]),
        ("setInventoryLevel", {"location_id": WAREHOUSE, "sku": MUG.sku}, ["available"]),
        ("setInventoryLevel", {"location_id": WAREHOUSE, "available": 3}, ["inventory_item_id"]),
        ("adjustInventoryLevel", {}, ["available_adjustment"]),
        ("adjustInventoryLevel", {"available_adjustment": -1}, ["inventory_item_id"]),
        (
            "adjustInventoryLevel",
            {"reason": "October", "reconcile": {"sourceStep": "step-1"}},
            ["adjustments"],
        ),
        ("getInventoryLevels", {}, ["inventory_item_ids"]),
    ],
)
async def test_missing_shopify_params(
    shop: FakeShopify,
    client: httpx.AsyncClient,
    action: str,
    params: dict[str, Any],
    missing: list[str],
) -> None:
    with pytest.raises(InvalidParams) as caught:
        await call(shopify(), shop, client, action, params)
    assert caught.value.code == "invalid_params" and caught.value.status == 422
    assert caught.value.details["missing"] == missing
    assert shop.requests == [] and shop.side_effects == []


@pytest.mark.parametrize(
    ("action", "params"),
    [
        ("getOrder", {"id": "../../shop"}),  # would walk out of orders/
        ("getOrder", {"id": True}),
        ("getOrder", {"id": 1, "fields": "id"}),  # unknown parameter
        ("listOrders", {"status": "everything"}),
        ("listOrders", {"created_at_min": "October"}),
        ("listOrders", {"limit": 1000}),
        (
            "adjustInventoryLevel",
            {"location_id": 1, "inventory_item_id": 1, "available_adjustment": 0},
        ),
        ("getInventoryLevels", {"inventory_item_ids": ["1", "x"]}),
        ("adjustInventoryLevel", {"adjustments": []}),
        ("adjustInventoryLevel", {"adjustments": [{"sku": "A", "delta": 0}]}),
        ("adjustInventoryLevel", {"adjustments": [{"sku": "A", "delta": 1, "price": 2}]}),
        ("adjustInventoryLevel", {"adjustments": [{"delta": 1}]}),
        ("adjustInventoryLevel", {"adjustments": [{"sku": "A", "delta": 1}], "sku": "B"}),
    ],
)
async def test_invalid_shopify_params(
    shop: FakeShopify, client: httpx.AsyncClient, action: str, params: dict[str, Any]
) -> None:
    with pytest.raises(InvalidParams):
        await call(shopify(), shop, client, action, params)
    assert shop.requests == []


async def test_missing_amazon_params_and_credentials(
    amazon: FakeAmazon, client: httpx.AsyncClient
) -> None:
    adapter = amazon_adapter()
    with pytest.raises(InvalidParams) as caught:
        await call(adapter, amazon, client, "getOrderItems", {})
    assert caught.value.details["missing"] == ["orderId"]
    with pytest.raises(InvalidParams):
        await call(adapter, amazon, client, "listOrders", {"CreatedAfter": "last month"})
    with pytest.raises(InvalidParams):
        await call(adapter, amazon, client, "getOrder", {"orderId": "../../listings"})
    with pytest.raises(InvalidParams):
        await call(adapter, amazon, client, "updateListingQuantity", {"sku": "X", "quantity": -1})
    credentials = amazon.credentials()
    del credentials["refreshToken"]
    with pytest.raises(MissingCredentials) as missing:
        await adapter.call(
            "getOrder", {"orderId": "1"}, credentials, client=client, idempotency_key="k"
        )
    assert missing.value.code == "integration_missing" and missing.value.status == 409
    assert missing.value.details["field"] == "refreshToken"
    assert amazon.requests == []


async def test_missing_shopify_credentials(shop: FakeShopify, client: httpx.AsyncClient) -> None:
    credentials = shop.credentials()
    del credentials["accessToken"]
    with pytest.raises(MissingCredentials) as caught:
        await shopify().call("getOrder", {"id": 1}, credentials, client=client, idempotency_key="k")
    assert caught.value.details == {"tool": "shopify", "field": "accessToken"}
    with pytest.raises(MissingCredentials):
        await shopify().call(
            "getOrder",
            {"id": 1},
            {"accessToken": SHOPIFY_TOKEN, "shopDomain": "evil.example/x?"},
            client=client,
            idempotency_key="k",
        )
    assert shop.requests == []


# ---------------------------------------------------------------- Shopify reads


async def test_shopify_list_orders_of_october_follows_pages(
    shop: FakeShopify, client: httpx.AsyncClient
) -> None:
    result = await call(shopify(), shop, client, "listOrders", {**OCTOBER, "limit": 2})
    orders = result["orders"]
    assert [o["name"] for o in orders] == [
        "#1002",
        "#1003",
        "#1004",
        "#1005",
        "#1006",
        "#1008",
        "#1009",
    ]
    synced = {
        a["value"] for o in orders for a in o["note_attributes"] if a["name"] == "amazon_order_id"
    }
    october = {o.order_id for o in catalog.AMAZON_ORDERS if o.purchased.month == 10}
    assert synced == october - {"113-2026100-0000004", "113-2026100-0000005"}
    assert (result["pages"], result["truncated"], result["nextPageInfo"]) == (4, False, None)
    listed = shop.requests_to("/orders.json")
    assert len(listed) == 4
    assert listed[0].query == {**OCTOBER, "status": "any", "limit": "2"}
    assert all(set(r.query) == {"limit", "page_info"} for r in listed[1:])


async def test_shopify_list_orders_stops_at_the_page_bound(
    shop: FakeShopify, client: httpx.AsyncClient
) -> None:
    adapter = ShopifyAdapter(max_pages=2)
    result = await call(adapter, shop, client, "listOrders", {"limit": 3})
    assert len(result["orders"]) == 6 and result["pages"] == 2
    assert result["truncated"] is True and result["nextPageInfo"]
    assert len(shop.requests) == 2


async def test_shopify_get_order_and_unknown_order(
    shop: FakeShopify, client: httpx.AsyncClient
) -> None:
    result = await call(shopify(), shop, client, "getOrder", {"id": "5600000000002"})
    order = result["order"]
    assert order["id"] == 5600000000002 and order["source_name"] == "amazon"
    assert [(li["sku"], li["quantity"]) for li in order["line_items"]] == [
        ("HW-MUG-001", 2),
        ("HW-TEE-M", 1),
    ]
    with pytest.raises(UpstreamError) as caught:
        await call(shopify(), shop, client, "getOrder", {"id": 999})
    assert caught.value.code == "upstream_error" and caught.value.status == 404
    assert caught.value.details["upstream_status"] == 404
    assert "outcome" not in caught.value.details
    assert len(shop.requests_to("/orders/999.json")) == 1  # a 404 is not retried


async def test_shopify_products_map_skus_to_inventory_items(
    shop: FakeShopify, client: httpx.AsyncClient
) -> None:
    result = await call(shopify(), shop, client, "listProducts")
    variants = {v["sku"]: v for p in result["products"] for v in p["variants"]}
    assert {sku: v["inventory_item_id"] for sku, v in variants.items()} == {
        s.sku: s.inventory_item_id for s in catalog.SKUS
    }
    one = await call(shopify(), shop, client, "listProducts", {"ids": [MUG.product_id]})
    assert [p["id"] for p in one["products"]] == [MUG.product_id]


async def test_shopify_inventory_levels(shop: FakeShopify, client: httpx.AsyncClient) -> None:
    result = await call(
        shopify(),
        shop,
        client,
        "getInventoryLevels",
        {"inventory_item_ids": [MUG.inventory_item_id]},
    )
    levels = {(lv["location_id"], lv["available"]) for lv in result["inventory_levels"]}
    assert levels == {(WAREHOUSE, 40), (STORE, 5)}
    at_store = await call(
        shopify(), shop, client, "getInventoryLevels", {"location_ids": str(STORE)}
    )
    assert {lv["inventory_item_id"] for lv in at_store["inventory_levels"]} == {
        MUG.inventory_item_id,
        catalog.BY_SKU["HW-TOTE-01"].inventory_item_id,
    }


# ---------------------------------------------------------------- Shopify writes


async def test_set_inventory_level_changes_the_store_once(
    shop: FakeShopify, client: httpx.AsyncClient
) -> None:
    result = await call(
        shopify(),
        shop,
        client,
        "setInventoryLevel",
        {"location_id": WAREHOUSE, "inventory_item_id": MUG.inventory_item_id, "available": 37},
        key="task-1/step-2",
    )
    assert result["inventory_level"]["available"] == 37
    assert shop.inventory(MUG.inventory_item_id) == 37
    assert shop.inventory(MUG.inventory_item_id, STORE) == 5  # the other location untouched
    assert len(shop.side_effects) == 1
    effect = shop.side_effects[0]
    assert effect.action == "setInventoryLevel"
    assert effect.body == {
        "location_id": WAREHOUSE,
        "inventory_item_id": MUG.inventory_item_id,
        "available": 37,
    }
    assert effect.idempotency_key == "task-1/step-2"


async def test_adjust_inventory_level_counts_each_call(
    shop: FakeShopify, client: httpx.AsyncClient
) -> None:
    params = {
        "location_id": WAREHOUSE,
        "inventory_item_id": MUG.inventory_item_id,
        "available_adjustment": -3,
    }
    first = await call(shopify(), shop, client, "adjustInventoryLevel", params)
    assert first["inventory_level"]["available"] == 37
    assert [e.action for e in shop.side_effects] == ["adjustInventoryLevel"]
    await call(shopify(), shop, client, "adjustInventoryLevel", params)
    assert shop.inventory(MUG.inventory_item_id) == 34
    assert len(shop.side_effects) == 2
    # reads are not side effects and carry no idempotency key
    await call(shopify(), shop, client, "getOrder", {"id": 5600000000002})
    assert len(shop.side_effects) == 2
    assert shop.requests_to("/orders/")[0].idempotency_key is None


async def test_shopify_refuses_an_unknown_inventory_item(
    shop: FakeShopify, client: httpx.AsyncClient
) -> None:
    with pytest.raises(UpstreamError) as caught:
        await call(
            shopify(),
            shop,
            client,
            "adjustInventoryLevel",
            {"location_id": WAREHOUSE, "inventory_item_id": 1, "available_adjustment": 1},
        )
    assert caught.value.status == 502 and caught.value.details["upstream_status"] == 422
    assert "Inventory item does not exist" in json.dumps(caught.value.details)
    assert shop.side_effects == [] and shop.levels() == catalog.INVENTORY


async def test_writes_by_sku_default_to_the_primary_location(
    shop: FakeShopify, client: httpx.AsyncClient
) -> None:
    result = await call(
        shopify(), shop, client, "setInventoryLevel", {"sku": "HW-TEE-L", "available": 11}
    )
    tee = catalog.BY_SKU["HW-TEE-L"].inventory_item_id
    assert result["inventory_level"]["inventory_item_id"] == tee
    assert shop.inventory(tee) == 11  # the shop's primary location is the warehouse
    assert len(shop.requests_to("/shop.json")) == 1
    # the integration may name the location instead: no shop lookup then
    await call(
        shopify(),
        shop,
        client,
        "adjustInventoryLevel",
        {"sku": MUG.sku, "available_adjustment": 2},
        locationId=str(STORE),
    )
    assert shop.inventory(MUG.inventory_item_id, STORE) == 7
    assert shop.inventory(MUG.inventory_item_id) == 40
    assert len(shop.requests_to("/shop.json")) == 1
    assert [e.action for e in shop.side_effects] == ["setInventoryLevel", "adjustInventoryLevel"]


async def test_inventory_levels_by_sku(shop: FakeShopify, client: httpx.AsyncClient) -> None:
    result = await call(
        shopify(),
        shop,
        client,
        "getInventoryLevels",
        {"sku": [MUG.sku, "HW-TEE-M"], "location_ids": [WAREHOUSE]},
    )
    assert result["skus"] == {
        MUG.sku: MUG.inventory_item_id,
        "HW-TEE-M": catalog.BY_SKU["HW-TEE-M"].inventory_item_id,
    }
    assert sorted(lv["available"] for lv in result["inventory_levels"]) == [25, 40]
    with pytest.raises(InvalidParams) as caught:
        await call(shopify(), shop, client, "getInventoryLevels", {"sku": "NO-SUCH"})
    assert caught.value.details["sku"] == "NO-SUCH"
    with pytest.raises(InvalidParams):  # a SKU and an item id that disagree
        await call(
            shopify(),
            shop,
            client,
            "setInventoryLevel",
            {"sku": MUG.sku, "inventory_item_id": 46100000000002, "available": 1},
        )
    assert shop.side_effects == []


async def test_a_list_of_adjustments_resolves_everything_first(
    shop: FakeShopify, client: httpx.AsyncClient
) -> None:
    adjustments = [
        {"sku": MUG.sku, "delta": -3},
        {"sku": "HW-TOTE-01", "delta": 1, "location_id": STORE},
    ]
    result = await call(
        shopify(),
        shop,
        client,
        "adjustInventoryLevel",
        {"adjustments": adjustments, "reason": "October", "reconcile": {"sourceStep": "step-1"}},
        key="task-4/step-2",
    )
    tote = catalog.BY_SKU["HW-TOTE-01"].inventory_item_id
    assert [(a["sku"], a["location_id"], a["available"]) for a in result["adjustments"]] == [
        (MUG.sku, WAREHOUSE, 37),
        ("HW-TOTE-01", STORE, 4),
    ]
    assert shop.inventory(MUG.inventory_item_id) == 37 and shop.inventory(tote, STORE) == 4
    assert [(e.body["inventory_item_id"], e.idempotency_key) for e in shop.side_effects] == [
        (MUG.inventory_item_id, "task-4/step-2#1"),
        (tote, "task-4/step-2#2"),
    ]
    # one unknown SKU anywhere in the list: nothing at all is changed
    with pytest.raises(InvalidParams):
        await call(
            shopify(),
            shop,
            client,
            "adjustInventoryLevel",
            {"adjustments": [{"sku": MUG.sku, "delta": -1}, {"sku": "NO-SUCH", "delta": 1}]},
        )
    assert len(shop.side_effects) == 2 and shop.inventory(MUG.inventory_item_id) == 37


async def test_a_failing_adjustment_reports_the_ones_already_made(
    shop: FakeShopify, client: httpx.AsyncClient
) -> None:
    shop.fail_next(500, path_contains="/adjust.json")  # the first change fails ...
    adjustments = [{"sku": "HW-TEE-M", "delta": -1}, {"sku": "HW-TEE-L", "delta": -1}]
    with pytest.raises(UpstreamError) as first:
        await call(shopify(), shop, client, "adjustInventoryLevel", {"adjustments": adjustments})
    assert first.value.details["applied"] == [] and shop.side_effects == []
    await call(shopify(), shop, client, "adjustInventoryLevel", {"adjustments": adjustments[:1]})
    shop.fail_next(500, path_contains="/adjust.json", after=1)  # ... now the second of two
    with pytest.raises(UpstreamError) as second:
        await call(
            shopify(),
            shop,
            client,
            "adjustInventoryLevel",
            {"adjustments": [{"sku": "HW-TOTE-01", "delta": -1}, {"sku": "HW-PIN-07", "delta": 5}]},
        )
    assert "after 1 of 2 adjustments" in second.value.message
    assert [a["sku"] for a in second.value.details["applied"]] == ["HW-TOTE-01"]
    assert second.value.details["failed"]["available_adjustment"] == 5
    assert [e.body["inventory_item_id"] for e in shop.side_effects] == [
        catalog.BY_SKU["HW-TEE-M"].inventory_item_id,
        catalog.BY_SKU["HW-TOTE-01"].inventory_item_id,
    ]
    assert shop.inventory_for_sku("HW-PIN-07") == 60


async def test_wrong_shopify_token_is_an_upstream_error_without_the_token(
    shop: FakeShopify, client: httpx.AsyncClient
) -> None:
    wrong = "shpat_wrong-token-0000feedbeef"
    with pytest.raises(UpstreamError) as caught:
        await call(
            shopify(),
            shop,
            client,
            "setInventoryLevel",
            {"location_id": WAREHOUSE, "inventory_item_id": MUG.inventory_item_id, "available": 1},
            accessToken=wrong,
        )
    error = caught.value
    assert error.code == "upstream_error" and error.status == 502
    assert error.details["upstream_status"] == 401
    assert "credentials were refused" in error.message
    assert_no_secret(error, wrong, SHOPIFY_TOKEN)
    assert shop.side_effects == [] and shop.inventory(MUG.inventory_item_id) == 40


# ---------------------------------------------------------------- retries


async def test_get_is_retried_after_a_503(shop: FakeShopify, client: httpx.AsyncClient) -> None:
    shop.fail_next(503)
    result = await call(shopify(), shop, client, "getOrder", {"id": 5600000000002})
    assert result["order"]["id"] == 5600000000002
    assert [r.status for r in shop.requests_to("/orders/5600000000002.json")] == [503, 200]


async def test_get_gives_up_after_two_retries(shop: FakeShopify, client: httpx.AsyncClient) -> None:
    shop.fail_next(429, times=3, retry_after=0)
    with pytest.raises(UpstreamError) as caught:
        await call(shopify(), shop, client, "getOrder", {"id": 5600000000002})
    assert caught.value.status == 429 and caught.value.details["upstream_status"] == 429
    assert [r.status for r in shop.requests] == [429, 429, 429]


async def test_post_is_not_retried(shop: FakeShopify, client: httpx.AsyncClient) -> None:
    shop.fail_next(503, path_contains="/inventory_levels/adjust.json")
    params = {
        "location_id": WAREHOUSE,
        "inventory_item_id": MUG.inventory_item_id,
        "available_adjustment": -3,
    }
    with pytest.raises(UpstreamError) as caught:
        await call(shopify(), shop, client, "adjustInventoryLevel", params)
    assert caught.value.status == 502 and caught.value.details["upstream_status"] == 503
    assert caught.value.details["outcome"] == "unknown"  # a 5xx to a write may have applied
    assert [r.status for r in shop.requests_to("/inventory_levels/adjust.json")] == [503]
    assert shop.side_effects == [] and shop.inventory(MUG.inventory_item_id) == 40


async def test_a_slow_get_is_retried_a_slow_post_is_reported_unknown(
    shop: FakeShopify, client: httpx.AsyncClient
) -> None:
    adapter = ShopifyAdapter(timeout=0.3, backoff=0.01)
    shop.stall_next(1.0)
    result = await call(adapter, shop, client, "getOrder", {"id": 5600000000002})
    assert result["order"]["id"] == 5600000000002
    shop.stall_next(1.0, path_contains="/inventory_levels/set.json")
    with pytest.raises(UpstreamError) as caught:
        await call(
            adapter,
            shop,
            client,
            "setInventoryLevel",
            {"location_id": WAREHOUSE, "inventory_item_id": MUG.inventory_item_id, "available": 1},
        )
    assert caught.value.status == 504 and "unknown" in caught.value.message
    assert caught.value.details["outcome"] == "unknown"
    # the stalled request still lands: the outcome really is unknown
    deadline = time.monotonic() + 60
    while not shop.requests_to("/inventory_levels/set.json"):
        assert time.monotonic() < deadline, "the stalled request never landed"
        await asyncio.sleep(0.05)
    assert len(shop.requests_to("/inventory_levels/set.json")) == 1


async def test_an_unreachable_upstream(client: httpx.AsyncClient) -> None:
    with FakeShopify() as gone:
        credentials = gone.credentials()
    with pytest.raises(UpstreamError) as caught:
        await shopify().call("getOrder", {"id": 1}, credentials, client=client, idempotency_key="k")
    assert caught.value.status == 502 and caught.value.details["reason"] == "ConnectError"
    assert "could not reach shopify" in caught.value.message
    assert_no_secret(caught.value, credentials["accessToken"])


# ---------------------------------------------------------------- Amazon


async def test_amazon_october_orders_across_pages(
    amazon: FakeAmazon, client: httpx.AsyncClient
) -> None:
    result = await call(amazon_adapter(), amazon, client, "listOrders", AMAZON_OCTOBER)
    ids = [o["AmazonOrderId"] for o in result["orders"]]
    assert ids == [o.order_id for o in catalog.AMAZON_ORDERS if o.purchased.month == 10]
    assert (result["pages"], result["truncated"], result["nextToken"]) == (3, False, None)
    pages = amazon.requests_to("/orders/v0/orders")
    assert len(pages) == 3
    assert pages[0].query["MarketplaceIds"] == catalog.MARKETPLACE_ID  # from the credentials
    assert "NextToken" in pages[1].query and "NextToken" in pages[2].query
    shipped = await call(
        amazon_adapter(),
        amazon,
        client,
        "listOrders",
        {**AMAZON_OCTOBER, "OrderStatuses": ["Unshipped", "Canceled"]},
    )
    assert [o["AmazonOrderId"] for o in shipped["orders"]] == [
        "113-2026100-0000004",
        "113-2026100-0000005",
    ]


async def test_amazon_order_and_items(client: httpx.AsyncClient) -> None:
    with FakeAmazon(items_page_size=1) as amazon:
        adapter = amazon_adapter()
        order = await call(adapter, amazon, client, "getOrder", {"orderId": "113-2026100-0000004"})
        assert order["order"]["OrderStatus"] == "Unshipped"
        assert order["order"]["OrderTotal"] == {"CurrencyCode": "USD", "Amount": "54.00"}
        items = await call(
            adapter, amazon, client, "getOrderItems", {"orderId": "113-2026100-0000006"}
        )
        assert [(i["SellerSKU"], i["QuantityOrdered"]) for i in items["orderItems"]] == [
            ("HW-TEE-M", 1),
            ("HW-MUG-001", 1),
        ]
        assert items["pages"] == 2 and items["orderId"] == "113-2026100-0000006"
        assert (items["truncated"], items["nextToken"]) == (False, None)
        # at most one page: the rest is named by the token of the first unread one
        one = AmazonAdapter(backoff=0.01, max_pages=1)
        first = await call(one, amazon, client, "getOrderItems", {"orderId": "113-2026100-0000006"})
        assert [i["SellerSKU"] for i in first["orderItems"]] == ["HW-TEE-M"]
        assert first["pages"] == 1 and first["truncated"] is True and first["nextToken"]
        with pytest.raises(UpstreamError) as caught:
            await call(adapter, amazon, client, "getOrder", {"orderId": "113-0000000-0000000"})
        assert caught.value.status == 404


async def test_lwa_token_is_exchanged_once_and_reused(
    amazon: FakeAmazon, client: httpx.AsyncClient
) -> None:
    adapter = amazon_adapter()
    await call(adapter, amazon, client, "getOrder", {"orderId": "113-2026100-0000001"})
    await call(adapter, amazon, client, "getOrderItems", {"orderId": "113-2026100-0000001"})
    await call(adapter, amazon, client, "listOrders", AMAZON_OCTOBER)
    assert amazon.token_exchanges == 1
    assert len(amazon.requests_to("/auth/o2/token", "POST")) == 1
    # another adapter (another process) has its own cache
    await call(amazon_adapter(), amazon, client, "getOrder", {"orderId": "113-2026100-0000001"})
    assert amazon.token_exchanges == 2


async def test_revoked_or_expired_token_is_exchanged_again(client: httpx.AsyncClient) -> None:
    with FakeAmazon(access_token_lifetime=1) as amazon:
        adapter = amazon_adapter()
        await call(adapter, amazon, client, "getOrder", {"orderId": "113-2026100-0000001"})
        amazon.revoke_access_tokens()
        result = await call(adapter, amazon, client, "getOrder", {"orderId": "113-2026100-0000001"})
        assert result["order"]["AmazonOrderId"] == "113-2026100-0000001"
        assert amazon.token_exchanges == 2
        assert [r.status for r in amazon.requests_to("/orders/v0/orders/")] == [200, 403, 200]
        await asyncio.sleep(1.0)  # past expiry: a new token before any SP-API request
        await call(adapter, amazon, client, "getOrder", {"orderId": "113-2026100-0000001"})
        assert amazon.token_exchanges == 3
        assert [r.status for r in amazon.requests_to("/orders/v0/orders/")] == [200, 403, 200, 200]


@pytest.mark.parametrize(
    ("field", "upstream_status", "lwa_error"),
    [("clientSecret", 401, "invalid_client"), ("refreshToken", 400, "invalid_grant")],
)
async def test_wrong_amazon_credentials(
    amazon: FakeAmazon,
    client: httpx.AsyncClient,
    field: str,
    upstream_status: int,
    lwa_error: str,
) -> None:
    wrong = "Atzr|wrong-value-for-tests-1234567890"
    with pytest.raises(UpstreamError) as caught:
        await call(
            amazon_adapter(),
            amazon,
            client,
            "updateListingQuantity",
            {"sku": "HW-MUG-001", "quantity": 1},
            **{field: wrong},
        )
    error = caught.value
    assert error.code == "upstream_error" and error.status == 502
    assert error.details["upstream_status"] == upstream_status
    assert error.details["step"] == "token_exchange"
    assert error.details["upstream_error"]["error"] == lwa_error
    assert_no_secret(error, wrong, amazon.client_secret, amazon.refresh_token, amazon.client_id)
    assert amazon.side_effects == [] and amazon.requests_to("/listings/") == []


async def test_update_listing_quantity(amazon: FakeAmazon, client: httpx.AsyncClient) -> None:
    result = await call(
        amazon_adapter(),
        amazon,
        client,
        "updateListingQuantity",
        {"sku": "HW-MUG-001", "quantity": 27},
        key="task-9/step-3",
    )
    assert result["status"] == "ACCEPTED" and result["sku"] == "HW-MUG-001"
    assert amazon.listing_quantity("HW-MUG-001") == 27
    assert [(e.action, e.body["sku"], e.body["quantity"]) for e in amazon.side_effects] == [
        ("updateListingQuantity", "HW-MUG-001", 27)
    ]
    assert amazon.side_effects[0].body["sellerId"] == catalog.SELLER_ID
    assert amazon.side_effects[0].idempotency_key == "task-9/step-3"
    with pytest.raises(UpstreamError) as caught:
        await call(
            amazon_adapter(),
            amazon,
            client,
            "updateListingQuantity",
            {"sku": "NO-SUCH-SKU", "quantity": 1},
        )
    assert caught.value.status == 404 and len(amazon.side_effects) == 1


async def test_amazon_patch_is_not_retried_get_is(
    amazon: FakeAmazon, client: httpx.AsyncClient
) -> None:
    adapter = amazon_adapter()
    amazon.fail_next(503, path_contains="/listings/")
    with pytest.raises(UpstreamError) as caught:
        await call(
            adapter, amazon, client, "updateListingQuantity", {"sku": "HW-TEE-M", "quantity": 3}
        )
    assert caught.value.details["upstream_status"] == 503
    assert caught.value.details["outcome"] == "unknown"
    assert len(amazon.requests_to("/listings/")) == 1
    assert amazon.side_effects == [] and amazon.listing_quantity("HW-TEE-M") == 20
    amazon.fail_next(500, path_contains="/orders/v0/")
    await call(adapter, amazon, client, "getOrder", {"orderId": "113-2026100-0000001"})
    assert [r.status for r in amazon.requests_to("/orders/v0/")] == [500, 200]


# ---------------------------------------------------------------- sanitising


def test_sanitise_redacts_secret_values_and_drops_secret_keys() -> None:
    secret = "shpat_abc123|x"
    value = {
        "order": {
            "id": 7,
            "note": f"token={secret}",
            "link": "https://x.test/?t=shpat_abc123%7Cx",  # URL-encoded echo
            "tags": ["ok", f"Bearer {secret}"],
            "Access_Token": "anything",
            "X-Shopify-Access-Token": "anything",
            "clientSecret": "anything",
            "Authorization": "Basic xyz",
            "user": {"password": "p", "api_key": "k", "name": "Ann"},
            "nested": ({"refresh_token": "r", "keep": 1.5, "none": None, "flag": True},),
        },
        secret: "a secret as a key",
    }
    before = json.dumps(value, sort_keys=True)
    cleaned = sanitise(value, [secret, ""])
    assert cleaned == {
        "order": {
            "id": 7,
            "note": REDACTED,
            "link": REDACTED,
            "tags": ["ok", REDACTED],
            "user": {"name": "Ann"},
            "nested": [{"keep": 1.5, "none": None, "flag": True}],
        },
        REDACTED: "a secret as a key",
    }
    assert json.dumps(value, sort_keys=True) == before  # the input is not touched
    assert sanitise("plain", []) == "plain" and sanitise(3, ["3"]) == 3


async def test_a_credential_echoed_by_shopify_is_removed(
    shop: FakeShopify, client: httpx.AsyncClient
) -> None:
    shop.patch_order(
        5600000000002,
        note=f"sync app debug: used token {SHOPIFY_TOKEN}",
        access_token=SHOPIFY_TOKEN,
        app={"client_secret": "s3cr3t-value", "name": "amazon-sync"},
    )
    result = await call(shopify(), shop, client, "getOrder", {"id": 5600000000002})
    order = result["order"]
    assert order["note"] == REDACTED
    assert "access_token" not in order and order["app"] == {"name": "amazon-sync"}
    assert SHOPIFY_TOKEN not in json.dumps(result) and "s3cr3t-value" not in json.dumps(result)
    assert order["line_items"][0]["sku"] == "HW-MUG-001"  # the rest is intact
    shop.fail_next(400, body={"errors": f"token {SHOPIFY_TOKEN} is not allowed here"})
    with pytest.raises(UpstreamError) as caught:
        await call(shopify(), shop, client, "getOrder", {"id": 5600000000002})
    assert caught.value.details["upstream_error"] == {"errors": REDACTED}
    assert_no_secret(caught.value, SHOPIFY_TOKEN)


async def test_amazon_access_token_echoed_in_an_error_is_removed(
    amazon: FakeAmazon, client: httpx.AsyncClient
) -> None:
    adapter = amazon_adapter()
    await call(adapter, amazon, client, "getOrder", {"orderId": "113-2026100-0000001"})
    (access_token,) = amazon.access_tokens
    amazon.fail_next(
        400,
        body={"errors": [{"code": "InvalidInput", "message": f"token {access_token} rejected"}]},
        path_contains="/orders/v0/",
    )
    with pytest.raises(UpstreamError) as caught:
        await call(adapter, amazon, client, "getOrder", {"orderId": "113-2026100-0000001"})
    assert caught.value.details["upstream_error"]["errors"][0]["message"] == REDACTED
    assert_no_secret(caught.value, access_token, amazon.client_secret, amazon.refresh_token)


async def test_a_listing_update_amazon_did_not_accept_is_an_error(
    amazon: FakeAmazon, client: httpx.AsyncClient
) -> None:
    adapter = amazon_adapter()
    await call(adapter, amazon, client, "getOrder", {"orderId": "113-2026100-0000001"})
    (access_token,) = amazon.access_tokens
    issue = {"code": "90220", "message": f"not for {access_token}", "severity": "ERROR"}
    amazon.fail_next(
        200,
        body={"sku": "HW-TEE-M", "status": "INVALID", "submissionId": "s1", "issues": [issue]},
        path_contains="/listings/",
    )
    with pytest.raises(UpstreamError) as caught:
        await call(
            adapter, amazon, client, "updateListingQuantity", {"sku": "HW-TEE-M", "quantity": 3}
        )
    assert caught.value.status == 502 and caught.value.details["upstream_status"] == 200
    assert caught.value.message == "amazon did not accept updateListingQuantity"
    assert caught.value.details["action"] == "updateListingQuantity"
    assert caught.value.details["upstream_error"][0]["code"] == "90220"
    assert caught.value.details["upstream_error"][0]["message"] == REDACTED
    assert_no_secret(caught.value, access_token)


async def test_no_credential_reaches_the_logs(
    shop: FakeShopify,
    amazon: FakeAmazon,
    client: httpx.AsyncClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    adapter = amazon_adapter()
    await call(adapter, amazon, client, "listOrders", AMAZON_OCTOBER)
    await call(shopify(), shop, client, "listOrders", OCTOBER)
    with pytest.raises(UpstreamError):
        await call(shopify(), shop, client, "getOrder", {"id": 1}, accessToken="shpat_bad-123456")
    shop.fail_next(503, times=3)
    with pytest.raises(UpstreamError):
        await call(shopify(), shop, client, "getOrder", {"id": 1})
    assert "shopify getOrder GET" in caplog.text  # the adapters do log
    secrets = [SHOPIFY_TOKEN, "shpat_bad-123456", amazon.refresh_token, amazon.client_secret]
    for secret in [*secrets, *amazon.access_tokens]:
        assert secret not in caplog.text


# ---------------------------------------------------------------- the seed's example


async def test_the_seeded_october_reconciliation_finds_one_discrepancy(
    shop: FakeShopify, amazon: FakeAmazon, client: httpx.AsyncClient
) -> None:
    """ "Reconcile all Amazon orders for October and update inventory in Shopify for any
    discrepancies", done with the adapters alone: the seeded data holds exactly one."""
    shop_adapter, amazon_one = shopify(), amazon_adapter()
    amazon_orders = await call(amazon_one, amazon, client, "listOrders", AMAZON_OCTOBER)
    in_shopify = {
        attribute["value"]
        for order in (await call(shop_adapter, shop, client, "listOrders", OCTOBER))["orders"]
        for attribute in order["note_attributes"]
        if attribute["name"] == "amazon_order_id"
    }
    missing: dict[str, int] = {}
    for order in amazon_orders["orders"]:
        if order["OrderStatus"] == "Canceled" or order["AmazonOrderId"] in in_shopify:
            continue
        items = await call(
            amazon_one, amazon, client, "getOrderItems", {"orderId": order["AmazonOrderId"]}
        )
        for item in items["orderItems"]:
            missing[item["SellerSKU"]] = missing.get(item["SellerSKU"], 0) + item["QuantityOrdered"]
    assert missing == {catalog.DISCREPANT_SKU: catalog.DISCREPANCY}
    adjustments = [{"sku": sku, "delta": -quantity} for sku, quantity in missing.items()]
    await call(shop_adapter, shop, client, "adjustInventoryLevel", {"adjustments": adjustments})
    assert shop.levels() == catalog.expected_inventory_after_reconcile()
    assert len(shop.side_effects) == 1 and amazon.side_effects == []
    assert amazon.token_exchanges == 1
