"""Fake upstreams for the tool proxy: real local HTTP servers (uvicorn in a background
thread on a free 127.0.0.1 port) that speak the Shopify Admin REST API and Amazon's
Login with Amazon + Selling Partner API for the actions the platform's adapters use,
over one seeded merchant (`catalog`), checking credentials like the real APIs and
counting every side effect.

    from humanwork_dev.fakes import FakeAmazon, FakeShopify, catalog

    with FakeShopify() as shop, FakeAmazon() as amazon:
        shop.credentials(), amazon.credentials()   # integration credentials to store
        ...
        assert len(shop.side_effects) == 1

No pytest dependency: the demo (`make up`) and the end-to-end tests import these too.
"""

from humanwork_dev.fakes import catalog
from humanwork_dev.fakes.amazon import FakeAmazon
from humanwork_dev.fakes.server import BackgroundServer, FakeUpstream, RecordedRequest, SideEffect
from humanwork_dev.fakes.shopify import FakeShopify

__all__ = [
    "BackgroundServer",
    "FakeAmazon",
    "FakeShopify",
    "FakeUpstream",
    "RecordedRequest",
    "SideEffect",
    "catalog",
]
