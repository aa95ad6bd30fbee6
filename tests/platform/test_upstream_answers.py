"""What the receipts' `answerStatus` is read from: `upstreams.answers()` collects the HTTP
status of every answer an upstream gives inside it (a 2xx, a refusal, a retried 5xx), and
nothing for a request that got no answer, against the fake Shopify on 127.0.0.1."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from humanwork_dev.fakes import FakeShopify, catalog
from platform_api.tools.upstreams import ShopifyAdapter, UpstreamError, answers
from platform_api.tools.upstreams.egress import Egress, EgressClient, EgressPolicy

LEVELS = {"inventory_item_ids": [catalog.BY_SKU["HW-MUG-001"].inventory_item_id]}
FIX = {
    "location_id": catalog.WAREHOUSE_LOCATION_ID,
    "inventory_item_id": catalog.BY_SKU["HW-MUG-001"].inventory_item_id,
    "available_adjustment": -1,
}


@pytest.fixture
def shop() -> Iterator[FakeShopify]:
    with FakeShopify() as fake:
        yield fake


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with EgressClient(Egress(EgressPolicy.parse(["127.0.0.1/32"])), timeout=5.0) as http:
        yield http


async def test_every_answer_is_noted_and_a_request_without_one_notes_nothing(
    shop: FakeShopify, client: httpx.AsyncClient
) -> None:
    adapter, creds = ShopifyAdapter(backoff=0.01), shop.credentials()
    with answers() as seen:
        await adapter.call("getInventoryLevels", LEVELS, creds, client=client, idempotency_key="")
    assert seen == [200]

    shop.fail_next(503, path_contains="inventory_levels.json")  # a read is retried
    with answers() as seen:
        await adapter.call("getInventoryLevels", LEVELS, creds, client=client, idempotency_key="")
    assert seen == [503, 200]

    shop.fail_next(422, body={"errors": "no"}, path_contains="adjust.json")
    with answers() as seen, pytest.raises(UpstreamError) as refused:
        await adapter.call("adjustInventoryLevel", FIX, creds, client=client, idempotency_key="k")
    assert seen[-1] == 422 and refused.value.details["upstream_status"] == 422
    assert shop.side_effects == []

    shop.refuse_connections()
    try:
        with answers() as seen, pytest.raises(UpstreamError):
            await adapter.call(
                "adjustInventoryLevel", FIX, creds, client=client, idempotency_key="k2"
            )
    finally:
        shop.serve_again()
    assert seen == []
    # outside a block nothing is collected, and the calls still run
    await adapter.call("getInventoryLevels", LEVELS, creds, client=client, idempotency_key="")
