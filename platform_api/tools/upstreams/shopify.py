"""The Shopify Admin REST API adapter: orders, products and inventory levels.

Credentials (as stored with `PUT /orgs/{orgId}/integrations/shopify`):
`shopDomain` (`acme.myshopify.com`), `accessToken` (sent as `X-Shopify-Access-Token`),
optional `baseUrl` (default `https://{shopDomain}`), `apiVersion` (default `2025-01`)
and `locationId` (the default location of writes; else the shop's primary location).
Requests go to `{baseUrl}/admin/api/{apiVersion}/...`; list actions follow the
`Link: <...>; rel="next"` cursor (`page_info`) up to the adapter's page bound.

Inventory writes name their item by `inventory_item_id` or by `sku` (resolved through
the product variants, since the REST API has no SKU filter), and `adjustInventoryLevel`
also takes a list of `adjustments` ([{sku, delta}], the agent planner's form), all
resolved before the first change; a failure part-way reports what was already applied.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar
from urllib.parse import parse_qs, urlsplit

import httpx

from humanwork_core import catalog
from platform_api.tools.upstreams.base import (
    Adapter,
    Exchange,
)
from platform_api.tools.upstreams.errors import InvalidParams, MissingCredentials, UpstreamError
from platform_api.tools.upstreams.params import (
    base_url,
    credential,
    param_datetime,
    param_id,
    param_int,
    param_list,
    param_str,
    require_credential,
)

DEFAULT_API_VERSION = "2025-01"
ORDER_STATUSES = ("open", "closed", "cancelled", "any")
MAX_PAGE_SIZE = 250
ID_PATTERN = r"[1-9]\d{0,19}"
DOMAIN_PATTERN = r"[A-Za-z0-9][A-Za-z0-9.-]{0,253}"
VERSION_PATTERN = r"\d{4}-\d{2}|unstable"

_T = TypeVar("_T")
MAX_ADJUSTMENTS = 50
ADJUSTMENT_FIELDS = ("sku", "inventory_item_id", "location_id", "delta")
SKU_PATTERN = r"[^\x00-\x1f\x7f]{1,255}"


@dataclass(frozen=True)
class _Target:
    """Which inventory level a write addresses, as the parameters name it."""

    sku: str | None
    inventory_item_id: int | None
    location_id: int | None


@dataclass(frozen=True)
class _Level:
    """A resolved inventory level."""

    inventory_item_id: int
    location_id: int
    sku: str | None


def _next_page_info(response: httpx.Response) -> str | None:
    """The `page_info` cursor of the `rel="next"` link, if any. Only the cursor is
    taken: the next request is built against the configured shop, never the link's
    host, so a forged link cannot draw the token elsewhere."""
    link = response.links.get("next")
    if not link or not link.get("url"):
        return None
    values = parse_qs(urlsplit(link["url"]).query).get("page_info")
    return values[0] if values else None


class ShopifyAdapter(Adapter):
    """Shopify Admin REST API (orders, products, inventory levels)."""

    tool: ClassVar[str] = "shopify"
    integration_type: ClassVar[str] = "shopify"
    public_credential_fields: ClassVar[frozenset[str]] = frozenset(
        {
            "shopDomain",
            "shop",
            "shop_domain",
            "baseUrl",
            "base_url",
            "apiVersion",
            "api_version",
            "locationId",
            "location_id",
        }
    )
    secret_credential_fields: ClassVar[frozenset[str]] = frozenset({"accessToken", "access_token"})

    def endpoint(
        self, credentials: Mapping[str, Any], client: httpx.AsyncClient | None = None
    ) -> tuple[str, dict[str, str]]:
        """The API root (`.../admin/api/{version}`) and the auth headers; the root is
        checked against the egress rules of `client` (`base_url`)."""
        token = require_credential(credentials, self.tool, "accessToken", "access_token")
        root = credential(credentials, "baseUrl", "base_url")
        field = "baseUrl"
        if root is None:
            field = "shopDomain"
            domain = require_credential(credentials, self.tool, "shopDomain", "shop", "shop_domain")
            if not re.fullmatch(DOMAIN_PATTERN, domain):
                raise MissingCredentials(
                    "the shopify integration's shopDomain is not a host name",
                    details={"tool": self.tool, "field": "shopDomain"},
                )
            root = f"https://{domain}"
        version = credential(credentials, "apiVersion", "api_version") or DEFAULT_API_VERSION
        if not re.fullmatch(VERSION_PATTERN, version):
            raise MissingCredentials(
                "the shopify integration's apiVersion is not like 2025-01",
                details={"tool": self.tool, "field": "apiVersion"},
            )
        headers = {"X-Shopify-Access-Token": token, "Accept": "application/json"}
        return f"{base_url(root, self.tool, client, field)}/admin/api/{version}", headers

    async def perform(
        self,
        spec: catalog.Action,
        params: dict[str, Any],
        credentials: Mapping[str, Any],
        exchange: Exchange,
    ) -> dict[str, Any]:
        shop = _Shop(self, exchange, credentials)
        match spec.name:
            case "listOrders":
                status = param_str(params, "status", default="any")
                if status not in ORDER_STATUSES:
                    raise InvalidParams(
                        f"status must be one of {', '.join(ORDER_STATUSES)}",
                        details={"param": "status"},
                    )
                query: dict[str, Any] = {"status": status}
                for name in ("created_at_min", "created_at_max"):
                    value = param_datetime(params, name)
                    if value is not None:
                        query[name] = value
                return await shop.paged("orders", query, params)
            case "getOrder":
                order_id = param_id(params, "id")
                response = await shop.get(f"orders/{order_id}.json")
                return {"order": _field(exchange, response, "order", dict)}
            case "listProducts":
                query = {}
                ids = param_list(params, "ids", pattern=ID_PATTERN, max_items=250)
                if ids is not None:
                    query["ids"] = ",".join(ids)
                return await shop.paged("products", query, params)
            case "getInventoryLevels":
                return await self._inventory_levels(shop, params)
            case "setInventoryLevel":
                available = _quantity(params, "available")
                (level,) = await shop.resolve([_target(params, "")])
                body = {
                    "location_id": level.location_id,
                    "inventory_item_id": level.inventory_item_id,
                    "available": available,
                }
                response = await shop.post(
                    "inventory_levels/set.json", body, exchange.idempotency_key
                )
                return {"inventory_level": _field(exchange, response, "inventory_level", dict)}
            case "adjustInventoryLevel":
                return await self._adjust(shop, params)
        raise AssertionError(f"unhandled action {spec.name}")  # pragma: no cover

    async def _inventory_levels(self, shop: _Shop, params: Mapping[str, Any]) -> dict[str, Any]:
        items = param_list(params, "inventory_item_ids", pattern=ID_PATTERN) or []
        locations = param_list(params, "location_ids", pattern=ID_PATTERN)
        skus = param_list(params, "sku", pattern=SKU_PATTERN)
        if not items and locations is None and skus is None:
            raise InvalidParams(
                "getInventoryLevels needs inventory_item_ids, location_ids or sku",
                details={"action": "getInventoryLevels", "missing": ["inventory_item_ids"]},
            )
        by_sku: dict[str, int] = {}
        if skus is not None:
            index = await shop.sku_index()
            for sku in skus:
                by_sku[sku] = shop.item_of(index, _Target(sku, None, None))
            items = list(dict.fromkeys([*items, *(str(i) for i in by_sku.values())]))
        query: dict[str, Any] = {"limit": MAX_PAGE_SIZE}
        if items:
            query["inventory_item_ids"] = ",".join(items)
        if locations is not None:
            query["location_ids"] = ",".join(locations)
        response = await shop.get("inventory_levels.json", query)
        result: dict[str, Any] = {
            "inventory_levels": _field(shop.exchange, response, "inventory_levels", list)
        }
        if skus is not None:
            result["skus"] = by_sku
        return result

    async def _adjust(self, shop: _Shop, params: Mapping[str, Any]) -> dict[str, Any]:
        raw = params.get("adjustments")
        if raw is None:
            return await self._adjust_one(shop, params)
        if any(
            params.get(p) is not None for p in ("inventory_item_id", "sku", "available_adjustment")
        ):
            raise InvalidParams(
                "give adjustments or a single available_adjustment, not both",
                details={"param": "adjustments"},
            )
        if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_ADJUSTMENTS:
            raise InvalidParams(
                f"adjustments must be a list of 1 to {MAX_ADJUSTMENTS} changes",
                details={"param": "adjustments"},
            )
        targets, deltas = [], []
        for index, entry in enumerate(raw):
            where = f"adjustments[{index}]"
            if not isinstance(entry, Mapping):
                raise InvalidParams(f"{where} must be an object", details={"param": where})
            unknown = sorted(str(k)[:50] for k in entry if k not in ADJUSTMENT_FIELDS)
            if unknown:
                raise InvalidParams(
                    f"{where} does not take {', '.join(unknown)}",
                    details={"param": where, "unknown": unknown},
                )
            targets.append(_target(entry, where))
            deltas.append(_delta(entry, "delta", where))
        # every SKU and location is resolved before the first change
        levels = await shop.resolve(targets)
        applied: list[dict[str, Any]] = []
        answered: list[Any] = []
        for number, (level, delta) in enumerate(zip(levels, deltas, strict=True), start=1):
            key = shop.exchange.idempotency_key
            if len(levels) > 1:
                key = f"{key}#{number}"
            body = {
                "location_id": level.location_id,
                "inventory_item_id": level.inventory_item_id,
                "available_adjustment": delta,
            }
            try:
                response = await shop.post("inventory_levels/adjust.json", body, key)
            except UpstreamError as exc:
                # the earlier changes stay made: say which, so that nobody repeats them
                exc.message += f" (after {len(applied)} of {len(levels)} adjustments)"
                exc.args = (exc.message,)
                exc.details["applied"] = applied
                exc.details["failed"] = {"sku": level.sku, **body}
                raise
            answer = _field(shop.exchange, response, "inventory_level", dict)
            answered.append(answer)
            applied.append({"sku": level.sku, **body, "available": answer.get("available")})
        return {"inventory_levels": answered, "adjustments": applied}

    async def _adjust_one(self, shop: _Shop, params: Mapping[str, Any]) -> dict[str, Any]:
        if params.get("available_adjustment") is None:
            pending = "reconcile" in params and params.get("sku") is None
            raise InvalidParams(
                "the step names no concrete adjustments: amend it with adjustments [{sku, delta}]"
                if pending
                else "adjustInventoryLevel needs adjustments [{sku, delta}], or "
                "available_adjustment with inventory_item_id or sku",
                details={
                    "action": "adjustInventoryLevel",
                    "missing": ["adjustments" if pending else "available_adjustment"],
                },
            )
        target = _target(params, "")
        delta = _delta(params, "available_adjustment")
        (level,) = await shop.resolve([target])
        body = {
            "location_id": level.location_id,
            "inventory_item_id": level.inventory_item_id,
            "available_adjustment": delta,
        }
        response = await shop.post(
            "inventory_levels/adjust.json", body, shop.exchange.idempotency_key
        )
        return {"inventory_level": _field(shop.exchange, response, "inventory_level", dict)}


def _field(exchange: Exchange, response: httpx.Response, key: str, kind: type) -> Any:
    """`key` of the response body, which must be a `kind`; UpstreamError otherwise."""
    value = exchange.json_body(response).get(key)
    if not isinstance(value, kind):
        raise UpstreamError(
            f"shopify answered {exchange.action} without {key!r}",
            details={"tool": "shopify", "action": exchange.action},
        )
    return value


def _target(entry: Mapping[str, Any], where: str) -> _Target:
    """The sku / inventory_item_id / location_id of a write (at least one of the first
    two); InvalidParams otherwise."""
    prefix = f"{where}." if where else ""
    item = (
        None
        if entry.get("inventory_item_id") is None
        else _renamed(param_id, entry, "inventory_item_id", prefix)
    )
    sku = None if entry.get("sku") is None else _renamed(_sku, entry, "sku", prefix)
    if item is None and sku is None:
        raise InvalidParams(
            f"{where or 'the write'} needs inventory_item_id or sku",
            details={"missing": [f"{prefix}inventory_item_id"]},
        )
    location = (
        None
        if entry.get("location_id") is None
        else _renamed(param_id, entry, "location_id", prefix)
    )
    return _Target(sku, item, location)


def _quantity(params: Mapping[str, Any], name: str) -> int:
    return param_int(params, name, minimum=-(10**9), maximum=10**9)


def _sku(params: Mapping[str, Any], name: str) -> str:
    return param_str(params, name, pattern=SKU_PATTERN, max_length=255)


def _renamed(
    parse: Callable[[Mapping[str, Any], str], _T], entry: Mapping[str, Any], name: str, prefix: str
) -> _T:
    """`parse(entry, name)`, with errors naming `{prefix}{name}`."""
    try:
        return parse(entry, name)
    except InvalidParams as exc:
        raise InvalidParams(
            exc.message.replace(repr(name), repr(prefix + name)),
            details={**exc.details, "param": prefix + name},
        ) from None


def _delta(entry: Mapping[str, Any], name: str, where: str = "") -> int:
    value = _renamed(_quantity, entry, name, f"{where}." if where else "")
    if value == 0:
        label = f"{where}.{name}" if where else name
        raise InvalidParams(f"{label} must not be 0", details={"param": label})
    return value


class _Shop:
    """One call's view of the shop: its API root and headers, with the SKU index and
    the default location fetched at most once."""

    def __init__(
        self, adapter: ShopifyAdapter, exchange: Exchange, credentials: Mapping[str, Any]
    ) -> None:
        self.adapter = adapter
        self.exchange = exchange
        self.credentials = credentials
        self.root, self.headers = adapter.endpoint(credentials, exchange.client)
        self._index: dict[str, list[int]] | None = None
        self._index_truncated = False
        self._location: int | None = None

    async def get(self, path: str, query: Mapping[str, Any] | None = None) -> httpx.Response:
        return await self.exchange.send(
            "GET", f"{self.root}/{path}", headers=self.headers, params=query
        )

    async def post(self, path: str, body: dict[str, Any], key: str) -> httpx.Response:
        return await self.exchange.send(
            "POST",
            f"{self.root}/{path}",
            headers={**self.headers, "Idempotency-Key": key},
            json=body,
        )

    async def paged(
        self, key: str, query: dict[str, Any], params: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Every page of a cursor-paginated list (`{key}.json`), up to `max_pages`."""
        limit = param_int(params, "limit", minimum=1, maximum=MAX_PAGE_SIZE, default=MAX_PAGE_SIZE)
        items: list[Any] = []
        page_query: dict[str, Any] = {**query, "limit": limit}
        pages = 0
        next_page: str | None = None
        while pages < self.adapter.max_pages:
            response = await self.get(f"{key}.json", page_query)
            items.extend(_field(self.exchange, response, key, list))
            pages += 1
            next_page = _next_page_info(response)
            if next_page is None:
                break
            # with page_info Shopify accepts only limit (and fields)
            page_query = {"limit": limit, "page_info": next_page}
        return {
            key: items,
            "pages": pages,
            "truncated": next_page is not None,
            "nextPageInfo": next_page,
        }

    async def sku_index(self) -> dict[str, list[int]]:
        """SKU -> the inventory item ids of the variants with that SKU (the REST API has
        no SKU filter: the products are listed, up to the page bound)."""
        if self._index is None:
            listed = await self.paged("products", {}, {})
            index: dict[str, list[int]] = {}
            for product in listed["products"]:
                variants = product.get("variants") if isinstance(product, dict) else None
                for variant in variants if isinstance(variants, list) else []:
                    if not isinstance(variant, dict):
                        continue
                    sku, item = variant.get("sku"), variant.get("inventory_item_id")
                    if isinstance(sku, str) and sku and isinstance(item, int):
                        index.setdefault(sku, []).append(item)
            self._index, self._index_truncated = index, bool(listed["truncated"])
        return self._index

    def item_of(self, index: Mapping[str, list[int]], target: _Target) -> int:
        """The inventory item a target names; InvalidParams when its SKU is unknown,
        ambiguous, or belongs to another item than the one named alongside."""
        if target.sku is None:
            assert target.inventory_item_id is not None
            return target.inventory_item_id
        items = index.get(target.sku, [])
        details: dict[str, Any] = {"sku": target.sku}
        if not items:
            if self._index_truncated:
                details["catalogue_truncated"] = True
            raise InvalidParams(f"no product variant has SKU {target.sku!r}", details=details)
        if target.inventory_item_id is not None:
            if target.inventory_item_id not in items:
                raise InvalidParams(
                    f"SKU {target.sku!r} is not inventory item {target.inventory_item_id}",
                    details=details,
                )
            return target.inventory_item_id
        if len(set(items)) > 1:
            raise InvalidParams(
                f"SKU {target.sku!r} names several inventory items; give inventory_item_id",
                details={**details, "inventory_item_ids": sorted(set(items))},
            )
        return items[0]

    async def default_location(self) -> int:
        """The integration's `locationId`, else the shop's primary location."""
        if self._location is None:
            configured = credential(self.credentials, "locationId", "location_id")
            if configured is not None:
                if not re.fullmatch(ID_PATTERN, configured):
                    raise MissingCredentials(
                        "the shopify integration's locationId is not a numeric id",
                        details={"tool": "shopify", "field": "locationId"},
                    )
                self._location = int(configured)
            else:
                response = await self.get("shop.json")
                primary = _field(self.exchange, response, "shop", dict).get("primary_location_id")
                if not isinstance(primary, int) or isinstance(primary, bool):
                    raise UpstreamError(
                        "shopify answered without the shop's primary location",
                        details={"tool": "shopify", "action": self.exchange.action},
                    )
                self._location = primary
        return self._location

    async def resolve(self, targets: list[_Target]) -> list[_Level]:
        """The inventory level of every target (one products listing for all SKUs, one
        shop lookup for every missing location)."""
        index: Mapping[str, list[int]] = {}
        if any(t.sku is not None for t in targets):
            index = await self.sku_index()
        levels = []
        for target in targets:
            item = self.item_of(index, target)
            location = target.location_id or await self.default_location()
            levels.append(_Level(item, location, target.sku))
        return levels
