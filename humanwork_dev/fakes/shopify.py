"""A fake Shopify Admin REST API: a real HTTP server speaking the paths and JSON shapes
the Shopify adapter uses, over the seeded store of `humanwork_dev.fakes.catalog`.

    with FakeShopify(access_token="shpat_test") as shop:
        shop.url                      # http://127.0.0.1:PORT (the integration's baseUrl)
        shop.credentials()            # what to store with PUT /orgs/{id}/integrations/shopify
        shop.inventory(46100000000001)            # 40 (warehouse); after a fix, 37
        shop.side_effects             # [SideEffect("adjustInventoryLevel", {...}, key)]
        shop.requests                 # every request, in order
        shop.fail_next(status=503)    # the next request gets a 503
        shop.misbehave_after_write("late", seconds=3)  # apply writes, answer 3 s later
        shop.misbehave_after_write("503")              # apply writes, answer 503
        shop.misbehave_after_write("cut")              # apply writes, cut the connection

Served under `/admin/api/{version}/`: `GET shop.json` (primary location: the
warehouse), `GET orders.json` (status, created_at_min,
created_at_max, limit, `page_info` cursor with a `Link` header), `GET orders/{id}.json`,
`GET products.json` (ids, limit, page_info), `GET inventory_levels.json`
(inventory_item_ids and/or location_ids), `POST inventory_levels/set.json`,
`POST inventory_levels/adjust.json`. A wrong or missing `X-Shopify-Access-Token` gets
401 like the real API.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from humanwork_dev.fakes import catalog
from humanwork_dev.fakes.server import ASGIApp, FakeUpstream, SideEffect

DEFAULT_TOKEN = "shpat_fake_0123456789abcdef0123456789"
UNAUTHORIZED = {
    "errors": "[API] Invalid API key or access token (unrecognized login or wrong password)"
}
VERSION_PATTERN = r"\d{4}-\d{2}|unstable"
DEFAULT_LIMIT = 50
MAX_LIMIT = 250

Handler = Callable[[Request], Awaitable[Response]]


class _CutResponse(Response):
    """Announces a body, sends a few bytes of it, then drops the connection."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"200")],
            }
        )
        await send({"type": "http.response.body", "body": b'{"inventory_', "more_body": True})
        raise ConnectionResetError("the fake cut the connection after applying the write")


async def _misbehave(misbehaviour: tuple[str, float], answer: dict[str, Any]) -> Response:
    mode, seconds = misbehaviour
    if mode == "late":
        await asyncio.sleep(seconds)
        return JSONResponse(answer)
    if mode == "503":
        return _error(503, "Service Unavailable")
    return _CutResponse()


def _error(status: int, errors: Any) -> JSONResponse:
    return JSONResponse({"errors": errors}, status_code=status)


def _moment(value: str) -> datetime:
    moment = datetime.fromisoformat(value)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _encode_cursor(filters: dict[str, Any], offset: int) -> str:
    raw = json.dumps({"f": filters, "o": offset}, sort_keys=True).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(value: str) -> tuple[dict[str, Any], int] | None:
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
        data = json.loads(raw)
        return dict(data["f"]), int(data["o"])
    except (binascii.Error, ValueError, KeyError, TypeError):
        return None


def _ids(value: str | None) -> list[int] | None:
    if value is None:
        return None
    if not re.fullmatch(r"\d+(,\d+)*", value):
        raise ValueError(value)
    return [int(v) for v in value.split(",")]


class FakeShopify(FakeUpstream):
    """The fake Shopify store; see the module docstring."""

    def __init__(
        self,
        access_token: str = DEFAULT_TOKEN,
        *,
        shop_domain: str = catalog.SHOP_DOMAIN,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.access_token = access_token
        self.shop_domain = shop_domain
        self._orders: dict[int, dict[str, Any]] = {o["id"]: o for o in catalog.shopify_orders()}
        self._products: list[dict[str, Any]] = catalog.shopify_products()
        self._levels: dict[tuple[int, int], dict[str, Any]] = {
            key: self._level(key[0], key[1], available, "2026-09-30T23:00:00-00:00")
            for key, available in catalog.INVENTORY.items()
        }
        self._misbehaviour: tuple[str, float] | None = None
        super().__init__(host=host, port=port)

    def misbehave_after_write(self, mode: str, *, seconds: float = 0.0) -> None:
        """From now on every inventory write is APPLIED (and counted as a side effect),
        and then: `late` answers normally after `seconds` (past the proxy's timeout);
        `503` answers 503; `cut` sends the first bytes of the answer and drops the
        connection. `behave()` ends it. The flaky upstreams that make a
        tool call's outcome unknown."""
        if mode not in ("late", "503", "cut"):
            raise ValueError(f"unknown misbehaviour {mode!r}")
        with self._lock:
            self._misbehaviour = (mode, seconds)

    def behave(self) -> None:
        """Answer writes normally again."""
        with self._lock:
            self._misbehaviour = None

    # ---------------------------------------------------------------- Python API

    def credentials(self, **overrides: str) -> dict[str, str]:
        """The integration credentials pointing at this fake."""
        return {
            "shopDomain": self.shop_domain,
            "accessToken": self.access_token,
            "baseUrl": self.url,
            "apiVersion": catalog.SHOPIFY_API_VERSION,
            **overrides,
        }

    def inventory(
        self, inventory_item_id: int, location_id: int = catalog.WAREHOUSE_LOCATION_ID
    ) -> int | None:
        """The available quantity of an inventory item at a location (None: not stocked)."""
        with self._lock:
            level = self._levels.get((inventory_item_id, location_id))
            return None if level is None else int(level["available"])

    def inventory_for_sku(
        self, sku: str, location_id: int = catalog.WAREHOUSE_LOCATION_ID
    ) -> int | None:
        """The available quantity of a SKU at a location."""
        return self.inventory(catalog.BY_SKU[sku].inventory_item_id, location_id)

    def levels(self) -> dict[tuple[int, int], int]:
        """Every (inventory item, location) -> available."""
        with self._lock:
            return {k: int(v["available"]) for k, v in self._levels.items()}

    def patch_order(self, order_id: int, **fields: Any) -> None:
        """Change fields of a seeded order (for instance a `note`)."""
        with self._lock:
            self._orders[order_id].update(fields)

    # ---------------------------------------------------------------- the app

    def build_app(self) -> ASGIApp:
        prefix = "/admin/api/{version}"
        routes = [
            Route(f"{prefix}/shop.json", self._guard(self._shop), methods=["GET"]),
            Route(f"{prefix}/orders.json", self._guard(self._list_orders), methods=["GET"]),
            Route(
                f"{prefix}/orders/{{order_id:int}}.json",
                self._guard(self._get_order),
                methods=["GET"],
            ),
            Route(f"{prefix}/products.json", self._guard(self._list_products), methods=["GET"]),
            Route(
                f"{prefix}/inventory_levels.json", self._guard(self._get_levels), methods=["GET"]
            ),
            Route(
                f"{prefix}/inventory_levels/set.json",
                self._guard(self._set_level),
                methods=["POST"],
            ),
            Route(
                f"{prefix}/inventory_levels/adjust.json",
                self._guard(self._adjust_level),
                methods=["POST"],
            ),
        ]

        async def not_found(request: Request, exc: Exception) -> Response:
            return _error(404, "Not Found")

        return Starlette(routes=routes, exception_handlers={404: not_found, 405: not_found})

    def _guard(self, handler: Handler) -> Handler:
        """The token check (401) and API version check (404) before `handler`."""

        async def guarded(request: Request) -> Response:
            if request.headers.get("x-shopify-access-token") != self.access_token:
                return JSONResponse(UNAUTHORIZED, status_code=401)
            if not re.fullmatch(VERSION_PATTERN, request.path_params["version"]):
                return _error(404, "Not Found")
            return await handler(request)

        return guarded

    def _page(
        self,
        request: Request,
        key: str,
        filters_of: Callable[[Request], dict[str, Any]],
        rows_of: Callable[[dict[str, Any]], list[dict[str, Any]]],
    ) -> Response:
        """One page of a cursor-paginated list, with the `Link` header."""
        query = request.query_params
        try:
            limit = int(query.get("limit", DEFAULT_LIMIT))
        except ValueError:
            return _error(400, {"limit": "Invalid value"})
        if not 1 <= limit <= MAX_LIMIT:
            return _error(400, {"limit": "Invalid value"})
        page_info = query.get("page_info")
        if page_info is not None:
            if set(query) - {"limit", "page_info", "fields"}:
                return _error(400, {"page_info": "cannot be combined with other filters"})
            cursor = _decode_cursor(page_info)
            if cursor is None:
                return _error(400, {"page_info": "Invalid value."})
            filters, offset = cursor
        else:
            try:
                filters, offset = filters_of(request), 0
            except ValueError as exc:
                return _error(400, {"base": [str(exc)]})
        with self._lock:
            rows = rows_of(filters)
        page = rows[offset : offset + limit]
        headers = {}
        if offset + limit < len(rows):
            base = str(request.url.replace(query=""))
            cursor_text = _encode_cursor(filters, offset + limit)
            headers["Link"] = f'<{base}?limit={limit}&page_info={cursor_text}>; rel="next"'
        return JSONResponse({key: page}, headers=headers)

    async def _shop(self, request: Request) -> Response:
        return JSONResponse(
            {
                "shop": {
                    "id": 77000000001,
                    "name": "Acme",
                    "domain": self.shop_domain,
                    "myshopify_domain": self.shop_domain,
                    "currency": catalog.CURRENCY,
                    "primary_location_id": catalog.WAREHOUSE_LOCATION_ID,
                }
            }
        )

    async def _list_orders(self, request: Request) -> Response:
        def filters_of(request: Request) -> dict[str, Any]:
            query = request.query_params
            status = query.get("status", "open")
            if status not in ("open", "closed", "cancelled", "any"):
                raise ValueError("status is invalid")
            filters: dict[str, Any] = {"status": status}
            for name in ("created_at_min", "created_at_max"):
                if name in query:
                    _moment(query[name])  # ValueError when not a date
                    filters[name] = query[name]
            return filters

        def rows_of(filters: dict[str, Any]) -> list[dict[str, Any]]:
            rows = []
            for order in sorted(self._orders.values(), key=lambda o: o["id"]):
                created = _moment(order["created_at"])
                status = filters["status"]
                if status == "open" and (order["closed_at"] or order["cancelled_at"]):
                    continue
                if status == "closed" and not order["closed_at"]:
                    continue
                if status == "cancelled" and not order["cancelled_at"]:
                    continue
                if "created_at_min" in filters and created < _moment(filters["created_at_min"]):
                    continue
                if "created_at_max" in filters and created > _moment(filters["created_at_max"]):
                    continue
                rows.append(json.loads(json.dumps(order)))
            return rows

        return self._page(request, "orders", filters_of, rows_of)

    async def _get_order(self, request: Request) -> Response:
        with self._lock:
            order = self._orders.get(request.path_params["order_id"])
            body = None if order is None else json.loads(json.dumps(order))
        if body is None:
            return _error(404, "Not Found")
        return JSONResponse({"order": body})

    async def _list_products(self, request: Request) -> Response:
        def filters_of(request: Request) -> dict[str, Any]:
            ids = _ids(request.query_params.get("ids"))
            return {} if ids is None else {"ids": ids}

        def rows_of(filters: dict[str, Any]) -> list[dict[str, Any]]:
            wanted = filters.get("ids")
            rows = []
            for product in self._products:
                if wanted is not None and product["id"] not in wanted:
                    continue
                copy = json.loads(json.dumps(product))
                for variant in copy["variants"]:
                    variant["inventory_quantity"] = sum(
                        int(level["available"])
                        for (item, _), level in self._levels.items()
                        if item == variant["inventory_item_id"]
                    )
                rows.append(copy)
            return rows

        return self._page(request, "products", filters_of, rows_of)

    async def _get_levels(self, request: Request) -> Response:
        query = request.query_params
        try:
            items = _ids(query.get("inventory_item_ids"))
            locations = _ids(query.get("location_ids"))
        except ValueError:
            return _error(400, {"inventory_item_ids": "Invalid value"})
        if items is None and locations is None:
            return _error(
                422,
                "inventory_item_ids, location_ids: At least one of inventory_item_ids or "
                "location_ids is required",
            )
        with self._lock:
            rows = [
                dict(level)
                for (item, location), level in sorted(self._levels.items())
                if (items is None or item in items) and (locations is None or location in locations)
            ]
        return JSONResponse({"inventory_levels": rows})

    @staticmethod
    def _level(item: int, location: int, available: int, updated: str) -> dict[str, Any]:
        return {
            "inventory_item_id": item,
            "location_id": location,
            "available": available,
            "updated_at": updated,
            "admin_graphql_api_id": (
                f"gid://shopify/InventoryLevel/{location}?inventory_item_id={item}"
            ),
        }

    @staticmethod
    async def _json(request: Request) -> dict[str, Any] | None:
        try:
            body = json.loads(await request.body())
        except ValueError:
            return None
        return body if isinstance(body, dict) else None

    @staticmethod
    def _int_field(body: dict[str, Any], name: str) -> int | None:
        value = body.get(name)
        if isinstance(value, bool):
            return None
        if isinstance(value, int):
            return value
        if isinstance(value, str) and re.fullmatch(r"-?\d+", value):
            return int(value)
        return None

    async def _inventory_change(self, request: Request, field: str, action: str) -> Response:
        body = await self._json(request)
        if body is None:
            return _error(400, "body is not a JSON object")
        values = {
            name: self._int_field(body, name)
            for name in ("location_id", "inventory_item_id", field)
        }
        missing = {
            name: "Required parameter missing or invalid" for name, v in values.items() if v is None
        }
        if missing:
            return _error(400, missing)
        item, location, amount = (
            int(values["inventory_item_id"] or 0),
            int(values["location_id"] or 0),
            int(values[field] or 0),
        )
        if item not in catalog.BY_INVENTORY_ITEM:
            return _error(422, {"inventory_item_id": ["Inventory item does not exist"]})
        if location not in catalog.LOCATIONS:
            return _error(422, {"location_id": ["Location does not exist"]})
        now = catalog.shopify_iso(datetime.now(UTC))
        with self._lock:
            level = self._levels.get((item, location))
            if level is None and field == "available_adjustment":
                return _error(422, ["Inventory item is not stocked at the location"])
            if level is None:
                level = self._levels[(item, location)] = self._level(item, location, 0, now)
            if field == "available_adjustment":
                level["available"] = int(level["available"]) + amount
            else:
                level["available"] = amount
            level["updated_at"] = now
            answer = dict(level)
            self._side_effects.append(
                SideEffect(action, body, request.headers.get("idempotency-key"))
            )
            misbehaviour = self._misbehaviour
        if misbehaviour is not None:
            return await _misbehave(misbehaviour, {"inventory_level": answer})
        return JSONResponse({"inventory_level": answer})

    async def _set_level(self, request: Request) -> Response:
        return await self._inventory_change(request, "available", "setInventoryLevel")

    async def _adjust_level(self, request: Request) -> Response:
        return await self._inventory_change(request, "available_adjustment", "adjustInventoryLevel")
