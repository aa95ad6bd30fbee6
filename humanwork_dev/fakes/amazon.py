"""A fake Amazon: the Login with Amazon token endpoint and the Selling Partner API paths
the Amazon adapter uses, on one real HTTP server, over the seeded orders of
`humanwork_dev.fakes.catalog`.

    with FakeAmazon(refresh_token="Atzr|...", client_id="amzn1...", client_secret="...") as amz:
        amz.url, amz.token_url        # SP-API base URL and LWA token URL
        amz.credentials()             # what to store with PUT /orgs/{id}/integrations/amazon
        amz.token_exchanges           # how many refresh-token exchanges it answered
        amz.revoke_access_tokens()    # every access token issued so far stops working
        amz.listing_quantity("HW-MUG-001")
        amz.side_effects, amz.requests, amz.fail_next(status=503)

`POST /auth/o2/token` (form: grant_type=refresh_token, refresh_token, client_id,
client_secret; 401 invalid_client / 400 invalid_grant like LWA), `GET /orders/v0/orders`
(MarketplaceIds, CreatedAfter, CreatedBefore, OrderStatuses, MaxResultsPerPage,
NextToken), `GET /orders/v0/orders/{orderId}`, `GET /orders/v0/orders/{orderId}/orderItems`
(NextToken), `PATCH /listings/2021-08-01/items/{sellerId}/{sku}` (fulfillment_availability
quantity). SP-API requests need a live `x-amz-access-token` (403 Unauthorized otherwise).
Pages hold `page_size` orders (3 by default, so October spans three pages).
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from humanwork_dev.fakes import catalog
from humanwork_dev.fakes.server import ASGIApp, FakeUpstream, SideEffect

DEFAULT_REFRESH_TOKEN = "Atzr|fake-refresh-token-0123456789abcdef"
DEFAULT_CLIENT_ID = "amzn1.application-oa2-client.fake0123456789"
DEFAULT_CLIENT_SECRET = "amzn1.oa2-cs.v1.fake-client-secret-0123456789"
TOKEN_PATH = "/auth/o2/token"
UNAUTHORIZED = {
    "errors": [
        {
            "code": "Unauthorized",
            "message": "Access to requested resource is denied.",
            "details": "The access token you provided is revoked, malformed or invalid.",
        }
    ]
}

Handler = Callable[[Request], Awaitable[Response]]


def _errors(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse(
        {"errors": [{"code": code, "message": message, "details": ""}]}, status_code=status
    )


def _moment(value: str) -> datetime:
    moment = datetime.fromisoformat(value)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _token(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data, sort_keys=True).encode()).decode()


def _untoken(value: str) -> dict[str, Any] | None:
    try:
        data = json.loads(base64.urlsafe_b64decode(value.encode()))
    except (binascii.Error, ValueError):
        return None
    return data if isinstance(data, dict) else None


class FakeAmazon(FakeUpstream):
    """The fake LWA + SP-API; see the module docstring."""

    def __init__(
        self,
        refresh_token: str = DEFAULT_REFRESH_TOKEN,
        client_id: str = DEFAULT_CLIENT_ID,
        client_secret: str = DEFAULT_CLIENT_SECRET,
        *,
        seller_id: str = catalog.SELLER_ID,
        access_token_lifetime: int = 3600,
        page_size: int = 3,
        items_page_size: int = 100,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.refresh_token = refresh_token
        self.client_id = client_id
        self.client_secret = client_secret
        self.seller_id = seller_id
        self.access_token_lifetime = access_token_lifetime
        self.page_size = page_size
        self.items_page_size = items_page_size
        self._access_tokens: dict[str, float] = {}  # token -> expiry (time.time())
        self._exchanges = 0
        self._orders = {o.order_id: o for o in catalog.AMAZON_ORDERS}
        self._listings = dict(catalog.AMAZON_LISTINGS)
        super().__init__(host=host, port=port)

    # ---------------------------------------------------------------- Python API

    @property
    def token_url(self) -> str:
        """The LWA token endpoint of this fake."""
        return f"{self.url}{TOKEN_PATH}"

    def credentials(self, **overrides: str) -> dict[str, str]:
        """The integration credentials pointing at this fake."""
        return {
            "refreshToken": self.refresh_token,
            "clientId": self.client_id,
            "clientSecret": self.client_secret,
            "marketplaceId": catalog.MARKETPLACE_ID,
            "sellerId": self.seller_id,
            "baseUrl": self.url,
            "tokenUrl": self.token_url,
            **overrides,
        }

    @property
    def token_exchanges(self) -> int:
        """How many refresh-token exchanges succeeded."""
        with self._lock:
            return self._exchanges

    @property
    def access_tokens(self) -> list[str]:
        """Every access token issued (for checking that none leaks)."""
        with self._lock:
            return list(self._access_tokens)

    def revoke_access_tokens(self) -> None:
        """Make every access token issued so far invalid (403 from then on)."""
        with self._lock:
            for token in self._access_tokens:
                self._access_tokens[token] = 0.0

    def listing_quantity(self, sku: str) -> int | None:
        """The quantity the seller's listing of `sku` offers."""
        with self._lock:
            return self._listings.get(sku)

    # ---------------------------------------------------------------- the app

    def build_app(self) -> ASGIApp:
        routes = [
            Route(TOKEN_PATH, self._exchange, methods=["POST"]),
            Route("/orders/v0/orders", self._guard(self._list_orders), methods=["GET"]),
            Route("/orders/v0/orders/{order_id}", self._guard(self._get_order), methods=["GET"]),
            Route(
                "/orders/v0/orders/{order_id}/orderItems",
                self._guard(self._order_items),
                methods=["GET"],
            ),
            Route(
                "/listings/2021-08-01/items/{seller_id}/{sku}",
                self._guard(self._patch_listing),
                methods=["PATCH"],
            ),
        ]

        async def not_found(request: Request, exc: Exception) -> Response:
            return _errors(404, "NotFound", "Resource not found")

        return Starlette(routes=routes, exception_handlers={404: not_found, 405: not_found})

    async def _exchange(self, request: Request) -> Response:
        form = dict(parse_qsl((await request.body()).decode(errors="replace")))
        if form.get("grant_type") != "refresh_token":
            return JSONResponse(
                {"error": "unsupported_grant_type", "error_description": "Invalid grant type"},
                status_code=400,
            )
        if (
            form.get("client_id") != self.client_id
            or form.get("client_secret") != self.client_secret
        ):
            return JSONResponse(
                {"error": "invalid_client", "error_description": "Client authentication failed"},
                status_code=401,
            )
        if form.get("refresh_token") != self.refresh_token:
            return JSONResponse(
                {
                    "error": "invalid_grant",
                    "error_description": "The request has an invalid grant parameter : "
                    "refresh_token",
                },
                status_code=400,
            )
        token = "Atza|" + secrets.token_urlsafe(32)
        with self._lock:
            self._access_tokens[token] = time.time() + self.access_token_lifetime
            self._exchanges += 1
        return JSONResponse(
            {
                "access_token": token,
                "refresh_token": self.refresh_token,
                "token_type": "bearer",
                "expires_in": self.access_token_lifetime,
            }
        )

    def _guard(self, handler: Handler) -> Handler:
        async def guarded(request: Request) -> Response:
            token = request.headers.get("x-amz-access-token", "")
            with self._lock:
                expiry = self._access_tokens.get(token, 0.0)
            if expiry <= time.time():
                return JSONResponse(UNAUTHORIZED, status_code=403)
            return await handler(request)

        return guarded

    async def _list_orders(self, request: Request) -> Response:
        query = request.query_params
        marketplaces = query.get("MarketplaceIds")
        if not marketplaces:
            return _errors(400, "InvalidInput", "MarketplaceIds is required")
        next_token = query.get("NextToken")
        if next_token is not None:
            state = _untoken(next_token)
            if state is None:
                return _errors(400, "InvalidInput", "Invalid NextToken")
            filters, offset = state["filters"], int(state["offset"])
        else:
            if "CreatedAfter" not in query and "LastUpdatedAfter" not in query:
                return _errors(
                    400, "InvalidInput", "Either CreatedAfter or LastUpdatedAfter must be set"
                )
            filters = {
                k: query[k]
                for k in ("CreatedAfter", "CreatedBefore", "OrderStatuses")
                if k in query
            }
            try:
                for k in ("CreatedAfter", "CreatedBefore"):
                    if k in filters:
                        _moment(filters[k])
            except ValueError:
                return _errors(400, "InvalidInput", "Invalid date")
            offset = 0
        try:
            per_page = int(query.get("MaxResultsPerPage", "100"))
        except ValueError:
            return _errors(400, "InvalidInput", "MaxResultsPerPage must be 1 to 100")
        if not 1 <= per_page <= 100:
            return _errors(400, "InvalidInput", "MaxResultsPerPage must be 1 to 100")
        per_page = min(per_page, self.page_size)
        wanted = set(marketplaces.split(","))
        statuses = set(filters["OrderStatuses"].split(",")) if "OrderStatuses" in filters else None
        rows = []
        with self._lock:
            orders = sorted(self._orders.values(), key=lambda o: o.purchased)
        for order in orders:
            if catalog.MARKETPLACE_ID not in wanted:
                continue
            if "CreatedAfter" in filters and order.purchased < _moment(filters["CreatedAfter"]):
                continue
            if "CreatedBefore" in filters and order.purchased > _moment(filters["CreatedBefore"]):
                continue
            if statuses is not None and order.status not in statuses:
                continue
            rows.append(catalog.amazon_order(order))
        payload: dict[str, Any] = {"Orders": rows[offset : offset + per_page]}
        if offset + per_page < len(rows):
            payload["NextToken"] = _token({"filters": filters, "offset": offset + per_page})
        else:
            payload["CreatedBefore"] = catalog.iso(datetime.now(UTC))
        return JSONResponse({"payload": payload})

    async def _get_order(self, request: Request) -> Response:
        order = self._orders.get(request.path_params["order_id"])
        if order is None:
            return _errors(404, "NotFound", "Order not found")
        return JSONResponse({"payload": catalog.amazon_order(order)})

    async def _order_items(self, request: Request) -> Response:
        order = self._orders.get(request.path_params["order_id"])
        if order is None:
            return _errors(404, "NotFound", "Order not found")
        offset = 0
        next_token = request.query_params.get("NextToken")
        if next_token is not None:
            state = _untoken(next_token)
            if state is None or state.get("order") != order.order_id:
                return _errors(400, "InvalidInput", "Invalid NextToken")
            offset = int(state["offset"])
        items = catalog.amazon_order_items(order)
        payload: dict[str, Any] = {
            "AmazonOrderId": order.order_id,
            "OrderItems": items[offset : offset + self.items_page_size],
        }
        if offset + self.items_page_size < len(items):
            payload["NextToken"] = _token(
                {"order": order.order_id, "offset": offset + self.items_page_size}
            )
        return JSONResponse({"payload": payload})

    async def _patch_listing(self, request: Request) -> Response:
        seller, sku = request.path_params["seller_id"], request.path_params["sku"]
        if seller != self.seller_id:
            return JSONResponse(UNAUTHORIZED, status_code=403)
        if not request.query_params.get("marketplaceIds"):
            return _errors(400, "InvalidInput", "marketplaceIds is required")
        with self._lock:
            known = sku in self._listings
        if not known:
            return _errors(404, "NOT_FOUND", f"SKU '{sku}' not found")
        submission = uuid.uuid4().hex
        try:
            body = json.loads(await request.body())
            quantity = self._quantity_of(body)
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            return JSONResponse(
                {
                    "sku": sku,
                    "status": "INVALID",
                    "submissionId": submission,
                    "issues": [{"code": "4000001", "message": str(exc), "severity": "ERROR"}],
                },
                status_code=400,
            )
        with self._lock:
            self._listings[sku] = quantity
            self._side_effects.append(
                SideEffect(
                    "updateListingQuantity",
                    {
                        "sellerId": seller,
                        "sku": sku,
                        "quantity": quantity,
                        "marketplaceIds": request.query_params["marketplaceIds"],
                        "request": body,
                    },
                    request.headers.get("idempotency-key"),
                )
            )
        return JSONResponse(
            {"sku": sku, "status": "ACCEPTED", "submissionId": submission, "issues": []}
        )

    @staticmethod
    def _quantity_of(body: Any) -> int:
        """The quantity of a fulfillment_availability replace patch (ValueError otherwise)."""
        if not isinstance(body, dict) or not isinstance(body.get("productType"), str):
            raise ValueError("productType is required")
        patches = body["patches"]
        if not isinstance(patches, list) or len(patches) != 1:
            raise ValueError("exactly one patch is supported")
        patch = patches[0]
        if patch["op"] != "replace" or patch["path"] != "/attributes/fulfillment_availability":
            raise ValueError("only a replace of /attributes/fulfillment_availability is supported")
        quantity = patch["value"][0]["quantity"]
        if not isinstance(quantity, int) or isinstance(quantity, bool) or quantity < 0:
            raise ValueError("quantity must be a non-negative integer")
        return quantity
