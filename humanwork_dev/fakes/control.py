"""The fakes' control port, for a harness that runs them in a pod (humanwork_dev.incluster)
and cannot call their methods: what the fake Shopify saw (its side effects, with the
Idempotency-Key each carried) and its misbehaviour after a write, over plain HTTP.

    GET  /shopify/side-effects                      -> [{"action", "idempotencyKey", "body"}]
    POST /shopify/misbehave {"mode": "late", "seconds": 8}
    POST /shopify/behave

Only on the port given to `python -m humanwork_dev.fakes --control-port`, which no Service
names: the test's host reaches it at the pod's address; the platform and the agents do not.
"""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from humanwork_dev.fakes.shopify import FakeShopify


def control_app(shop: FakeShopify) -> Any:
    """The control app of `shop`."""

    async def side_effects(_: Request) -> Response:
        return JSONResponse(
            [
                {"action": s.action, "idempotencyKey": s.idempotency_key, "body": s.body}
                for s in shop.side_effects
            ]
        )

    async def misbehave(request: Request) -> Response:
        doc = await request.json()
        try:
            shop.misbehave_after_write(str(doc["mode"]), seconds=float(doc.get("seconds", 0)))
        except (KeyError, TypeError, ValueError) as exc:
            return JSONResponse({"error": str(exc)}, status_code=422)
        return JSONResponse({"misbehaving": doc["mode"]})

    async def behave(_: Request) -> Response:
        shop.behave()
        return JSONResponse({"misbehaving": None})

    return Starlette(
        routes=[
            Route("/shopify/side-effects", side_effects, methods=["GET"]),
            Route("/shopify/misbehave", misbehave, methods=["POST"]),
            Route("/shopify/behave", behave, methods=["POST"]),
        ]
    )
