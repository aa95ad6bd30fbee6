"""Integration endpoints from the attacker's side (issue 12, item 7): an org admin (who
holds `tools.manage`) points an integration at the platform's own network: the cloud
metadata service, a cluster Service, loopback behind a friendly name. Each is refused
when stored (422 `integration_endpoint_refused`, nothing stored) and, for rows stored
before these rules or names that re-resolve, when called: the transport refuses the
address before any connection is made. No test sends a packet to an address it did not
create: names resolve through the tests' own resolver, and the network backend under
the transport records every connection it is asked to make.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any
from urllib.parse import urlsplit

import httpcore
import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from humanwork_dev.fakes import FakeShopify
from humanwork_dev.fakes.server import BackgroundServer
from platform_api.app import create_app
from platform_api.tools.upstreams import ShopifyAdapter, UpstreamError
from platform_api.tools.upstreams.egress import (
    Egress,
    EgressBlocked,
    EgressClient,
    EgressPolicy,
)
from platform_api.tools.upstreams.errors import EgressRefused
from tests.platform.conftest import Api, StaticResolver, TwoOrgs, make_settings

PUBLIC = "23.227.38.65"  # never connected to: only the store-time check sees it
NAMES = {
    "acme.myshopify.com": [PUBLIC],
    "rebind.myshopify.com": ["127.0.0.1"],
    "meta.myshopify.com": ["169.254.169.254"],
    "split.myshopify.com": [PUBLIC, "10.96.0.1"],
    "sellingpartnerapi-eu.amazon.com": ["54.239.0.10"],
    "api.amazon.com": ["54.239.0.11"],
}
TOKEN = "shpat_egress_tests_0123456789abcdef"


@pytest.fixture
def resolver() -> StaticResolver:
    return StaticResolver(NAMES)


async def _stored(db: AsyncEngine) -> list[tuple[Any, ...]]:
    async with db.connect() as conn:
        rows = await conn.execute(
            text("SELECT org_id, type, nonce, ciphertext FROM integration_credentials")
        )
        return [tuple(r) for r in rows]


ATTACKS = [
    # (type, credentials, field, reason)
    ("shopify", {"baseUrl": "http://169.254.169.254/"}, "baseUrl", "address_forbidden"),
    (
        "shopify",
        {"baseUrl": "https://169.254.169.254/latest/meta-data"},
        "baseUrl",
        "address_forbidden",
    ),
    ("shopify", {"baseUrl": "http://user:pw@x.myshopify.com"}, "baseUrl", "userinfo"),
    ("shopify", {"baseUrl": "https://x.myshopify.com#f"}, "baseUrl", "fragment"),
    ("shopify", {"baseUrl": "http://x.myshopify.com"}, "baseUrl", "scheme_not_allowed"),
    ("shopify", {"baseUrl": "https://10.96.0.1:443/"}, "baseUrl", "address_forbidden"),
    ("shopify", {"baseUrl": "https://kubernetes.default.svc/"}, "baseUrl", "host_not_allowed"),
    (
        "shopify",
        {"baseUrl": "https://db.humanwork.svc.cluster.local:5432"},
        "baseUrl",
        "host_not_allowed",
    ),
    ("shopify", {"baseUrl": "https://rebind.myshopify.com"}, "baseUrl", "address_forbidden"),
    ("shopify", {"baseUrl": "https://split.myshopify.com"}, "baseUrl", "address_forbidden"),
    ("shopify", {"shopDomain": "meta.myshopify.com"}, "shopDomain", "address_forbidden"),
    ("shopify", {"baseUrl": "https://[::ffff:127.0.0.1]/"}, "baseUrl", "address_forbidden"),
    ("shopify", {"baseUrl": "https://[fe80::1]/"}, "baseUrl", "address_forbidden"),
    ("shopify", {"baseUrl": "https://2130706433/"}, "baseUrl", "host_not_allowed"),
    ("shopify", {"baseUrl": "https://a.b.myshopify.com.evil.io"}, "baseUrl", "host_not_allowed"),
    ("shopify", {"baseUrl": "file:///etc/passwd"}, "baseUrl", "invalid_url"),
    (
        "amazon",
        {"tokenUrl": "https://evil.example.com/auth/o2/token"},
        "tokenUrl",
        "host_not_allowed",
    ),
    ("amazon", {"baseUrl": "https://api.amazon.com.evil.io"}, "baseUrl", "host_not_allowed"),
    ("amazon", {"baseUrl": "https://x.myshopify.com"}, "baseUrl", "host_not_allowed"),
    ("custom", {"webhookUrl": "https://example.com/hook"}, "webhookUrl", "host_not_allowed"),
]


@pytest.mark.parametrize(("kind", "fields", "field", "reason"), ATTACKS)
async def test_an_org_admin_cannot_point_an_integration_at_the_platforms_network(
    client: httpx.AsyncClient,
    two_orgs: TwoOrgs,
    db: AsyncEngine,
    kind: str,
    fields: dict[str, str],
    field: str,
    reason: str,
) -> None:
    org, h = two_orgs.org_a, two_orgs.admin_a.headers
    good = {"shopDomain": "acme.myshopify.com", "accessToken": TOKEN}
    assert (
        await client.put(f"/orgs/{org}/integrations/{kind}", json={"credentials": good}, headers=h)
    ).status_code == 200
    before = await _stored(db)
    r = await client.put(
        f"/orgs/{org}/integrations/{kind}",
        json={"credentials": {"accessToken": TOKEN, **fields}},
        headers=h,
    )
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["code"] == "integration_endpoint_refused"
    assert body["details"] == {"field": field, "reason": reason}
    assert TOKEN not in r.text
    assert await _stored(db) == before  # nothing stored, the earlier credentials intact


async def test_allowed_hosts_are_stored(
    client: httpx.AsyncClient, two_orgs: TwoOrgs, db: AsyncEngine, resolver: StaticResolver
) -> None:
    org, h = two_orgs.org_a, two_orgs.admin_a.headers
    accepted = {
        "shopify": {"baseUrl": "https://acme.myshopify.com/", "accessToken": TOKEN},
        "amazon": {
            "baseUrl": "https://sellingpartnerapi-eu.amazon.com",
            "tokenUrl": "https://api.amazon.com/auth/o2/token",
            "refreshToken": "Atzr|x",
        },
    }
    for kind, creds in accepted.items():
        r = await client.put(
            f"/orgs/{org}/integrations/{kind}", json={"credentials": creds}, headers=h
        )
        assert r.status_code == 200, r.text
    assert len(await _stored(db)) == 2
    assert ("acme.myshopify.com", 443) in resolver.asked


@pytest.fixture
async def fake_friendly_client(database_url: str) -> AsyncIterator[tuple[httpx.AsyncClient, Api]]:
    """The platform with HUMANWORK_UPSTREAM_ALLOWED_ENDPOINTS naming a local fake."""
    settings = make_settings(
        database_url, upstream_allowed_endpoints=["127.0.0.1:8091", "10.1.0.0/16"]
    )
    app = create_app(settings, resolver=StaticResolver(NAMES))
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://p") as c,
    ):
        yield c, Api(c)


async def test_the_setting_allows_exactly_the_fakes_it_names(
    fake_friendly_client: tuple[httpx.AsyncClient, Api],
) -> None:
    client, api = fake_friendly_client
    admin = await api.admin()
    org = await api.org(admin, "gamma")
    url = f"/orgs/{org}/integrations/shopify"
    for allowed in ("http://127.0.0.1:8091", "http://10.1.2.3:9000"):
        creds = {"baseUrl": allowed, "accessToken": TOKEN}
        r = await client.put(url, json={"credentials": creds}, headers=admin.headers)
        assert r.status_code == 200, (allowed, r.text)
    for refused, reason in (
        ("http://127.0.0.1:8092", "address_forbidden"),  # another port of loopback
        ("http://169.254.169.254/", "address_forbidden"),
        ("https://rebind.myshopify.com", "address_forbidden"),
        ("http://u:p@127.0.0.1:8091", "userinfo"),
    ):
        creds = {"baseUrl": refused, "accessToken": TOKEN}
        r = await client.put(url, json={"credentials": creds}, headers=admin.headers)
        assert r.status_code == 422, refused
        assert r.json()["details"]["reason"] == reason, refused


# ---------------------------------------------------------------- call and connect time


class RecordingBackend(httpcore.AsyncNetworkBackend):
    """The real socket backend, recording every connection it is asked to make."""

    def __init__(self) -> None:
        self.inner = httpcore.AnyIOBackend()
        self.connects: list[tuple[str, int]] = []

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        self.connects.append((host, port))
        return await self.inner.connect_tcp(
            host, port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


@pytest.fixture
def shop() -> Iterator[FakeShopify]:
    with FakeShopify(access_token=TOKEN) as fake:
        yield fake


def _port(fake: FakeShopify) -> int:
    port = urlsplit(fake.url).port
    assert port is not None
    return port


async def _list_products(client: httpx.AsyncClient, creds: dict[str, str]) -> dict[str, Any]:
    adapter = ShopifyAdapter(backoff=0.01, max_retries=0)
    return await adapter.call("listProducts", {}, creds, client=client, idempotency_key="k")


async def test_a_name_that_resolves_to_loopback_is_refused_before_connecting(
    shop: FakeShopify,
) -> None:
    """DNS rebinding: the name answered a public address when it was stored; when the
    proxy calls, it answers loopback (where the fake listens). No connection is made."""
    names = StaticResolver({"rebind.myshopify.com": [PUBLIC]})
    backend = RecordingBackend()
    async with EgressClient(Egress(EgressPolicy(), names), timeout=5, inner=backend) as client:
        names.names["rebind.myshopify.com"] = ["127.0.0.1"]
        creds = shop.credentials(baseUrl=f"https://rebind.myshopify.com:{_port(shop)}")
        with pytest.raises(UpstreamError) as caught:
            await _list_products(client, creds)
        assert caught.value.details["reason"] == "EgressBlocked"
        with pytest.raises(EgressBlocked, match=r"127\.0\.0\.1"):
            await client.get(f"https://rebind.myshopify.com:{_port(shop)}/admin")
    assert backend.connects == []
    assert shop.requests == []


async def test_a_stored_metadata_url_is_refused_at_call_time_before_any_connection() -> None:
    """A row stored before these rules (or written to the database directly)."""
    backend = RecordingBackend()
    async with EgressClient(Egress(resolver=StaticResolver()), timeout=5, inner=backend) as client:
        for url, reason in (
            ("http://169.254.169.254/latest/meta-data", "address_forbidden"),
            ("https://kubernetes.default.svc", "host_not_allowed"),
            ("https://x.myshopify.com#f", "fragment"),
        ):
            with pytest.raises(EgressRefused) as caught:
                await _list_products(client, {"baseUrl": url, "accessToken": TOKEN})
            assert caught.value.reason == reason
        # and the transport itself, should any code skip the URL check
        for url in ("http://169.254.169.254/latest", "https://10.96.0.1/api"):
            with pytest.raises(EgressBlocked):
                await client.get(url)
    assert backend.connects == []


async def test_the_fake_is_reached_when_the_setting_names_it(shop: FakeShopify) -> None:
    backend = RecordingBackend()
    policy = EgressPolicy.parse([f"127.0.0.1:{_port(shop)}"])
    async with EgressClient(Egress(policy, StaticResolver()), timeout=5, inner=backend) as client:
        result = await _list_products(client, shop.credentials())
        assert result["products"]
        with pytest.raises(EgressBlocked):  # the same address on another port is not allowed
            await client.get(f"http://127.0.0.1:{_port(shop) + 1}/")
    assert backend.connects == [("127.0.0.1", _port(shop))]


def test_the_setting_is_parsed_strictly() -> None:
    policy = EgressPolicy.parse(["localhost:8091", "[::1]:9000", "10.0.0.0/8"])
    assert policy.allows_endpoint("localhost", 8091)
    assert not policy.allows_endpoint("localhost", 8092)
    assert policy.allows_endpoint("::1", 9000)
    assert policy.allows_endpoint("10.2.3.4", 1)
    for bad in ("localhost", "10.0.0.0/33", "host:99999"):
        with pytest.raises(ValueError):
            EgressPolicy.parse([bad])
    assert json.dumps(sorted(EgressPolicy().endpoints)) == "[]"


class CookieSite:
    """Sets a cookie on `/login`; records the Cookie header every request carried."""

    def __init__(self) -> None:
        self.cookies: list[str | None] = []
        self.server = BackgroundServer(Starlette(routes=[Route("/{path:path}", self.page)]))

    async def page(self, request: Request) -> Response:
        self.cookies.append(request.headers.get("cookie"))
        response = PlainTextResponse("ok")
        if request.url.path == "/login":
            response.set_cookie("session", "org-a-secret", path="/")
        return response


async def test_the_client_keeps_no_cookie_and_no_connection_between_calls() -> None:
    site = CookieSite()
    with site.server:
        port = site.server.port
        assert port is not None
        backend = RecordingBackend()
        policy = EgressPolicy.parse([f"127.0.0.1:{port}"])
        async with EgressClient(Egress(policy, StaticResolver()), timeout=5, inner=backend) as c:
            for path in ("/login", "/again", "/other"):
                r = await c.get(f"http://127.0.0.1:{port}{path}")
                assert r.status_code == 200 and r.text == "ok"  # each call was served
            assert dict(c.cookies) == {}
    assert site.cookies == [None, None, None]
    assert backend.connects == [("127.0.0.1", port)] * 3  # a connection per call
