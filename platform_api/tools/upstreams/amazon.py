"""The Amazon Selling Partner API adapter: orders, order items and listing quantities.

Credentials (as stored with `PUT /orgs/{orgId}/integrations/amazon`): the Login with
Amazon (LWA) `refreshToken`, `clientId` and `clientSecret`, the default
`marketplaceId`, optional `sellerId` (for listings), `baseUrl` (default
`https://sellingpartnerapi-na.amazon.com`) and `tokenUrl` (default
`https://api.amazon.com/auth/o2/token`).

Each call first needs an LWA access token: the refresh token is exchanged at the token
URL (form POST, `grant_type=refresh_token`) and the access token kept in memory, per
credential, until shortly before it expires; SP-API requests carry it as
`x-amz-access-token`. When the SP-API refuses a cached token (401/403) it is exchanged
again once. List actions follow `NextToken` up to the adapter's page bound.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from typing import Any, ClassVar
from urllib.parse import quote

import httpx

from humanwork_core import catalog
from platform_api.tools.upstreams.base import (
    DEFAULT_BACKOFF,
    DEFAULT_MAX_PAGES,
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT,
    Adapter,
    Exchange,
)
from platform_api.tools.upstreams.errors import InvalidParams, UpstreamError
from platform_api.tools.upstreams.params import (
    base_url,
    credential,
    param_datetime,
    param_int,
    param_list,
    param_str,
    require_credential,
)

DEFAULT_BASE_URL = "https://sellingpartnerapi-na.amazon.com"
DEFAULT_TOKEN_URL = "https://api.amazon.com/auth/o2/token"
DEFAULT_TOKEN_LIFETIME = 3600
TOKEN_CACHE_LIMIT = 1024
ORDER_ID_PATTERN = r"[A-Za-z0-9-]{1,50}"
MARKETPLACE_PATTERN = r"[A-Z0-9]{1,20}"
SELLER_PATTERN = r"[A-Z0-9]{1,20}"
SKU_PATTERN = r"(?!\.{1,2}$)[^\x00-\x1f\x7f]{1,40}"
PRODUCT_TYPE_PATTERN = r"[A-Z0-9_]{1,60}"
ORDER_STATUSES = (
    "PendingAvailability",
    "Pending",
    "Unshipped",
    "PartiallyShipped",
    "Shipped",
    "InvoiceUnconfirmed",
    "Canceled",
    "Unfulfillable",
)


class AmazonAdapter(Adapter):
    """Amazon Selling Partner API (orders, order items, listing quantity)."""

    tool: ClassVar[str] = "amazon"
    integration_type: ClassVar[str] = "amazon"
    public_credential_fields: ClassVar[frozenset[str]] = frozenset(
        {
            "marketplaceId",
            "marketplace_id",
            "sellerId",
            "seller_id",
            "baseUrl",
            "base_url",
            "tokenUrl",
            "token_url",
            "region",
        }
    )
    secret_credential_fields: ClassVar[frozenset[str]] = frozenset(
        {"refreshToken", "refresh_token", "clientId", "client_id", "clientSecret", "client_secret"}
    )

    def __init__(
        self,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        backoff: float = DEFAULT_BACKOFF,
        max_pages: int = DEFAULT_MAX_PAGES,
    ) -> None:
        super().__init__(
            timeout=timeout, max_retries=max_retries, backoff=backoff, max_pages=max_pages
        )
        # sha256 of (token URL, client id, client secret, refresh token) -> (token, expiry)
        self._tokens: dict[str, tuple[str, float]] = {}
        self.token_exchanges = 0

    # ------------------------------------------------------------ LWA access tokens

    @staticmethod
    def _cache_key(token_url: str, client_id: str, secret: str, refresh: str) -> str:
        material = json.dumps([token_url, client_id, secret, refresh]).encode()
        return hashlib.sha256(material).hexdigest()

    def forget_tokens(self) -> None:
        """Drop every cached access token (the next call exchanges again)."""
        self._tokens.clear()

    async def _access_token(
        self, credentials: Mapping[str, Any], exchange: Exchange, *, fresh: bool
    ) -> tuple[str, str, bool]:
        """(access token, cache key, whether it came from the cache)."""
        refresh = require_credential(credentials, self.tool, "refreshToken", "refresh_token")
        client_id = require_credential(credentials, self.tool, "clientId", "client_id")
        secret = require_credential(credentials, self.tool, "clientSecret", "client_secret")
        token_url = base_url(
            credential(credentials, "tokenUrl", "token_url") or DEFAULT_TOKEN_URL,
            self.tool,
            exchange.client,
            "tokenUrl",
        )
        key = self._cache_key(token_url, client_id, secret, refresh)
        now = time.monotonic()
        cached = self._tokens.get(key)
        if cached is not None and not fresh and cached[1] > now:
            exchange.secrets += (cached[0],)
            return cached[0], key, True
        self._tokens.pop(key, None)
        response = await exchange.send(
            "POST",
            token_url,
            headers={"Accept": "application/json"},
            data={
                "grant_type": "refresh_token",
                "refresh_token": refresh,
                "client_id": client_id,
                "client_secret": secret,
            },
            retry=True,  # exchanging a refresh token changes nothing upstream
            raise_for_status=False,
        )
        self.token_exchanges += 1
        if response.status_code >= 400:
            error = exchange.error(
                response,
                message=f"amazon's token endpoint refused the integration's credentials "
                f"({response.status_code})",
            )
            error.details["step"] = "token_exchange"
            raise error
        body = exchange.json_body(response)
        token = body.get("access_token")
        if not isinstance(token, str) or not token:
            raise UpstreamError(
                "amazon's token endpoint answered without an access token",
                details={"tool": self.tool, "action": exchange.action, "step": "token_exchange"},
            )
        exchange.secrets += (token,)
        lifetime = body.get("expires_in")
        if not isinstance(lifetime, int | float) or isinstance(lifetime, bool) or lifetime <= 0:
            lifetime = DEFAULT_TOKEN_LIFETIME
        margin = min(60.0, lifetime * 0.1)
        if len(self._tokens) >= TOKEN_CACHE_LIMIT:
            self._tokens = {k: v for k, v in self._tokens.items() if v[1] > now}
            while len(self._tokens) >= TOKEN_CACHE_LIMIT:
                self._tokens.pop(next(iter(self._tokens)))
        self._tokens[key] = (token, now + lifetime - margin)
        return token, key, False

    async def _sp(
        self,
        credentials: Mapping[str, Any],
        exchange: Exchange,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        side_effecting: bool = False,
    ) -> httpx.Response:
        """One SP-API request with a valid access token (exchanged again once when a
        cached one is refused)."""
        root = base_url(
            credential(credentials, "baseUrl", "base_url") or DEFAULT_BASE_URL,
            self.tool,
            exchange.client,
        )
        token, key, from_cache = await self._access_token(credentials, exchange, fresh=False)
        for attempt in range(2):
            headers = {"x-amz-access-token": token, "Accept": "application/json"}
            if side_effecting:
                headers["Idempotency-Key"] = exchange.idempotency_key
            response = await exchange.send(
                method,
                f"{root}{path}",
                headers=headers,
                params=params,
                json=body,
                raise_for_status=False,
            )
            if response.status_code in (401, 403) and from_cache and attempt == 0:
                # the cached token was revoked or expired early: a refused request did
                # nothing upstream, so it is safe to send again with a new token
                await response.aclose()
                self._tokens.pop(key, None)
                token, key, from_cache = await self._access_token(credentials, exchange, fresh=True)
                continue
            if response.status_code >= 400:
                raise exchange.error(response, unsafe=side_effecting)
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    # ------------------------------------------------------------ actions

    def _marketplaces(self, params: Mapping[str, Any], credentials: Mapping[str, Any]) -> str:
        ids = param_list(params, "MarketplaceIds", pattern=MARKETPLACE_PATTERN)
        if ids is None:
            default = credential(credentials, "marketplaceId", "marketplace_id")
            if default is None:
                raise InvalidParams(
                    "MarketplaceIds is required: the amazon integration has no marketplaceId",
                    details={"param": "MarketplaceIds"},
                )
            ids = [default]
        return ",".join(ids)

    async def perform(
        self,
        spec: catalog.Action,
        params: dict[str, Any],
        credentials: Mapping[str, Any],
        exchange: Exchange,
    ) -> dict[str, Any]:
        actions = {
            "listOrders": self._list_orders,
            "getOrder": self._get_order,
            "getOrderItems": self._get_order_items,
            "updateListingQuantity": self._update_listing_quantity,
        }
        action = actions.get(spec.name)
        if action is None:  # pragma: no cover
            raise AssertionError(f"unhandled action {spec.name}")
        return await action(params, credentials, exchange)

    async def _list_orders(
        self, params: dict[str, Any], credentials: Mapping[str, Any], exchange: Exchange
    ) -> dict[str, Any]:
        """Orders created in a window, paged."""
        marketplaces = self._marketplaces(params, credentials)
        query: dict[str, Any] = {
            "MarketplaceIds": marketplaces,
            "CreatedAfter": param_datetime(params, "CreatedAfter"),
            "MaxResultsPerPage": 100,
        }
        before = param_datetime(params, "CreatedBefore")
        if before is not None:
            query["CreatedBefore"] = before
        statuses = param_list(params, "OrderStatuses", pattern="|".join(ORDER_STATUSES))
        if statuses is not None:
            query["OrderStatuses"] = ",".join(statuses)
        orders, paging = await self._paged(
            credentials,
            exchange,
            "/orders/v0/orders",
            query,
            "Orders",
            {"MarketplaceIds": marketplaces},
        )
        return {"orders": orders, **paging}

    async def _get_order(
        self, params: dict[str, Any], credentials: Mapping[str, Any], exchange: Exchange
    ) -> dict[str, Any]:
        """One order."""
        order_id = param_str(params, "orderId", pattern=ORDER_ID_PATTERN)
        response = await self._sp(credentials, exchange, "GET", f"/orders/v0/orders/{order_id}")
        return {"order": self._payload(exchange, response)}

    async def _get_order_items(
        self, params: dict[str, Any], credentials: Mapping[str, Any], exchange: Exchange
    ) -> dict[str, Any]:
        """An order's items, paged."""
        order_id = param_str(params, "orderId", pattern=ORDER_ID_PATTERN)
        path = f"/orders/v0/orders/{order_id}/orderItems"
        items, paging = await self._paged(credentials, exchange, path, {}, "OrderItems", {})
        return {"orderId": order_id, "orderItems": items, **paging}

    async def _update_listing_quantity(
        self, params: dict[str, Any], credentials: Mapping[str, Any], exchange: Exchange
    ) -> dict[str, Any]:
        """Set a listing's quantity (the one write; never retried)."""
        sku = param_str(params, "sku", pattern=SKU_PATTERN)
        quantity = param_int(params, "quantity", minimum=0, maximum=10**7)
        seller = params.get("sellerId") or credential(credentials, "sellerId", "seller_id")
        if seller is None:
            raise InvalidParams(
                "sellerId is required: the amazon integration has no sellerId",
                details={"param": "sellerId"},
            )
        seller = param_str({"sellerId": seller}, "sellerId", pattern=SELLER_PATTERN)
        product_type = param_str(
            params, "productType", pattern=PRODUCT_TYPE_PATTERN, default="PRODUCT"
        )
        patch = {
            "productType": product_type,
            "patches": [
                {
                    "op": "replace",
                    "path": "/attributes/fulfillment_availability",
                    "value": [{"fulfillment_channel_code": "DEFAULT", "quantity": quantity}],
                }
            ],
        }
        response = await self._sp(
            credentials,
            exchange,
            "PATCH",
            f"/listings/2021-08-01/items/{seller}/{quote(sku, safe='')}",
            params={"marketplaceIds": self._marketplaces(params, credentials)},
            body=patch,
            side_effecting=True,
        )
        result = exchange.json_body(response)
        if result.get("status") != "ACCEPTED":
            raise UpstreamError(
                f"amazon did not accept {exchange.action}",
                details={
                    "tool": self.tool,
                    "action": exchange.action,
                    "upstream_status": response.status_code,
                    "upstream_error": result.get("issues"),
                },
            )
        return {
            "sku": result.get("sku", sku),
            "status": result["status"],
            "submissionId": result.get("submissionId"),
            "issues": result.get("issues", []),
        }

    async def _paged(
        self,
        credentials: Mapping[str, Any],
        exchange: Exchange,
        path: str,
        query: dict[str, Any],
        key: str,
        next_query: dict[str, Any],
    ) -> tuple[list[Any], dict[str, Any]]:
        """The items of every page (following `NextToken` up to `max_pages`), and the
        paging of the result: the number of pages read, whether there are more, and the
        token of the first unread page (None when all were read)."""
        items: list[Any] = []
        pages = 0
        page_query = query
        next_token: str | None = None
        while pages < self.max_pages:
            response = await self._sp(credentials, exchange, "GET", path, params=page_query)
            payload = self._payload(exchange, response)
            page = payload.get(key)
            if not isinstance(page, list):
                raise UpstreamError(
                    f"amazon answered {exchange.action} without {key!r}",
                    details={"tool": self.tool, "action": exchange.action},
                )
            items.extend(page)
            pages += 1
            token = payload.get("NextToken")
            next_token = token if isinstance(token, str) and token else None
            if next_token is None:
                break
            page_query = {**next_query, "NextToken": next_token}
        return items, {"pages": pages, "truncated": next_token is not None, "nextToken": next_token}

    def _payload(self, exchange: Exchange, response: httpx.Response) -> dict[str, Any]:
        payload = exchange.json_body(response).get("payload")
        if not isinstance(payload, dict):
            raise UpstreamError(
                f"amazon answered {exchange.action} without a payload",
                details={"tool": self.tool, "action": exchange.action},
            )
        return payload
