"""Tool permissions mean what they say (issue 15, item 10), from the attacker's side: an
agent holding a valid token calls an action its org's config does not allow, exceeds the
hourly rate (across two platform replicas sharing the database), and makes `web.fetch` read
a domain off the org's allowlist, follow a redirect to a private or metadata address, or
pull a huge body. Every refusal has its stable code and happens before the upstream is
called; the pages come from a local HTTP server on loopback that records every request.

Names resolve through the test's resolver only (`docs.acme.test` -> 127.0.0.1, allowed as a
test endpoint; `inner.acme.test` -> a private address): no request leaves the machine, and
no metadata address is ever contacted (its URL is refused before any lookup).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from humanwork_dev.fakes.server import BackgroundServer
from humanwork_dev.fakes.shopify import FakeShopify
from platform_api.app import create_app
from platform_api.settings import Settings
from tests.agents import agent_credentials, provision_agent
from tests.conftest import Cluster
from tests.platform.conftest import Caller, StaticResolver, make_settings
from tests.platform_k8s.conftest import Orgs
from tests.platform_k8s.test_tool_proxy import call, store_credentials

DOCS = "docs.acme.test"
INNER = "inner.acme.test"
LIMIT = 2048


class Pages:
    """A small web site on loopback; `seen` lists the paths it was asked for."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.app = Starlette(routes=[Route("/{path:path}", self.page)])
        self.server = BackgroundServer(self.app)

    async def page(self, request: Request) -> Response:
        path = request.url.path
        self.seen.append(path)
        port = request.url.port
        if path == "/hello":
            return PlainTextResponse("Returns are accepted within 30 days.")
        if path == "/big":
            return PlainTextResponse("x" * (LIMIT * 4))
        if path == "/to-hello":
            return RedirectResponse(f"http://{DOCS}:{port}/hello", status_code=302)
        if path == "/to-inner":
            return RedirectResponse(f"https://{INNER}/admin", status_code=302)
        if path == "/to-metadata":
            return RedirectResponse("http://169.254.169.254/latest/meta-data/", status_code=302)
        if path == "/loop":
            return RedirectResponse(f"http://{DOCS}:{port}/loop", status_code=302)
        return PlainTextResponse("no such page", status_code=404)


@pytest.fixture(scope="module")
def pages() -> Iterator[Pages]:
    site = Pages()
    site.server.start()
    yield site
    site.server.stop()


@pytest.fixture
def settings(database_url: str, platform_kubeconfig: Path, pages: Pages) -> Settings:
    # loopback for the fakes, and the docs site's name on its port, as test endpoints only
    return make_settings(
        database_url,
        kubeconfig=str(platform_kubeconfig),
        upstream_allowed_endpoints=["127.0.0.1/32", f"{DOCS}:{pages.server.port}"],
        web_fetch_max_bytes=LIMIT,
    )


@pytest.fixture
def resolver() -> StaticResolver:
    return StaticResolver({DOCS: ["127.0.0.1"], INNER: ["10.20.30.40"]})


@pytest.fixture
def shop() -> Iterator[FakeShopify]:
    with FakeShopify() as fake:
        yield fake


@pytest.fixture
async def agent(client: httpx.AsyncClient, cluster: Cluster, orgs: Orgs) -> dict[str, str]:
    """Org A's agent (its token header); its AgentInstance lists shopify and web."""
    provision_agent(cluster, orgs.ns_a, orgs.org_a, enabledTools=["shopify", "web"])
    token, _ = agent_credentials(cluster, orgs.ns_a)
    return {"Authorization": f"Bearer {token}"}


async def configure(
    client: httpx.AsyncClient, admin: Caller, org: str, tool: str, config: dict[str, Any]
) -> httpx.Response:
    return await client.put(
        f"/orgs/{org}/tool-permissions/{tool}",
        json={"enabled": True, "config": config},
        headers=admin.headers,
    )


async def shopify(
    client: httpx.AsyncClient, orgs: Orgs, shop: FakeShopify, config: dict[str, Any]
) -> None:
    r = await configure(client, orgs.admin_a, orgs.org_a, "shopify", config)
    assert r.status_code == 200, r.text
    await store_credentials(client, orgs.admin_a, orgs.org_a, "shopify", shop.credentials())


# --- the config is checked when it is set ----------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "config", "field"),
    [
        ("shopify", {"allowedActions": ["listProducts", "dropTables"]}, "allowedActions"),
        ("shopify", {"allowedActons": ["listProducts"]}, "allowedActons"),
        ("shopify", {"ratePerHour": 0}, "ratePerHour"),
        ("shopify", {"allowedDomains": ["docs.acme.test"]}, "allowedDomains"),
        ("web", {"allowedDomains": ["http://docs.acme.test/"]}, "allowedDomains"),
        ("web", {"allowedDomains": ["10.0.0.1"]}, "allowedDomains"),
    ],
    ids=["unknown-action", "unknown-key", "zero-rate", "domains-on-shopify", "url", "address"],
)
async def test_a_config_the_proxy_cannot_enforce_is_refused_when_set(
    client: httpx.AsyncClient, orgs: Orgs, tool: str, config: dict[str, Any], field: str
) -> None:
    r = await configure(client, orgs.admin_a, orgs.org_a, tool, config)
    assert r.status_code == 422, r.text
    assert r.json()["code"] == "invalid_tool_config"
    assert r.json()["details"]["field"] == field
    listed = await client.get(f"/orgs/{orgs.org_a}/tool-permissions", headers=orgs.admin_a.headers)
    assert all(p["tool"] != tool for p in listed.json()), "nothing was stored"
    if field == "allowedActions":
        assert r.json()["details"]["unknown"] == ["dropTables"]


# --- allowed actions and the rate -------------------------------------------------------------


async def test_an_action_the_org_did_not_allow_is_refused_before_the_upstream(
    client: httpx.AsyncClient, orgs: Orgs, agent: dict[str, str], shop: FakeShopify
) -> None:
    await shopify(client, orgs, shop, {"allowedActions": ["getOrder"]})
    r = await call(client, agent, "listProducts", {})
    assert r.status_code == 403, r.text
    assert r.json()["code"] == "tool_action_not_allowed"
    assert shop.requests == []
    allowed = await call(client, agent, "getOrder", {"id": 1})
    assert allowed.json().get("code") != "tool_action_not_allowed", allowed.text


async def test_the_hourly_rate_holds_across_two_replicas(
    client: httpx.AsyncClient,
    settings: Settings,
    resolver: StaticResolver,
    orgs: Orgs,
    agent: dict[str, str],
    shop: FakeShopify,
) -> None:
    await shopify(client, orgs, shop, {"ratePerHour": 3})
    async with replica(settings, resolver) as other:
        answers = [await call(c, agent, "listProducts", {}) for c in (client, other, client, other)]
    assert [a.status_code for a in answers[:3]] == [200, 200, 200], answers[2].text
    refused = answers[3]
    assert refused.status_code == 429, refused.text
    assert refused.json()["code"] == "tool_rate_limited"
    assert 1 <= int(refused.headers["Retry-After"]) <= 3600
    assert len(shop.requests_to("products.json")) == 3
    # the count is the database's: this replica refuses too
    r = await call(client, agent, "listProducts", {})
    assert r.status_code == 429, r.text


class replica:  # used as `async with replica(...)`
    """A second platform API on the same database (another replica)."""

    def __init__(self, settings: Settings, resolver: StaticResolver) -> None:
        self.app: FastAPI = create_app(settings, resolver=resolver)
        self.context: Any = None
        self.client: httpx.AsyncClient | None = None

    async def __aenter__(self) -> httpx.AsyncClient:
        self.context = self.app.router.lifespan_context(self.app)
        await self.context.__aenter__()
        transport = httpx.ASGITransport(app=self.app)
        self.client = httpx.AsyncClient(transport=transport, base_url="http://replica", timeout=60)
        return self.client

    async def __aexit__(self, *exc: object) -> None:
        assert self.client is not None
        await self.client.aclose()
        await self.context.__aexit__(None, None, None)


# --- web.fetch --------------------------------------------------------------------------------


@pytest.fixture
async def web(
    client: httpx.AsyncClient, orgs: Orgs, agent: dict[str, str]
) -> AsyncIterator[dict[str, str]]:
    r = await configure(
        client, orgs.admin_a, orgs.org_a, "web", {"allowedDomains": [DOCS, "*.acme.test"]}
    )
    assert r.status_code == 200, r.text
    yield agent


async def fetch(client: httpx.AsyncClient, agent: dict[str, str], url: str) -> httpx.Response:
    return await call(client, agent, "fetch", {"url": url}, tool="web")


async def test_web_fetch_reads_an_allowed_page_through_the_proxy(
    client: httpx.AsyncClient, orgs: Orgs, web: dict[str, str], pages: Pages
) -> None:
    base = f"http://{DOCS}:{pages.server.port}"
    r = await fetch(client, web, f"{base}/to-hello")
    assert r.status_code == 200, r.text
    result = r.json()["result"]
    assert result["text"] == "Returns are accepted within 30 days."
    assert result["url"] == f"{base}/hello" and result["status"] == 200
    assert r.json()["sideEffecting"] is False
    audit = await client.get(
        "/audit", params={"action": "tool.called"}, headers=orgs.admin_a.headers
    )
    assert audit.json()["items"][0]["target"] == "tool:web.fetch"


async def test_web_fetch_refuses_a_domain_off_the_allowlist_without_looking_it_up(
    client: httpx.AsyncClient, web: dict[str, str], resolver: StaticResolver
) -> None:
    for url in (
        "https://evil.example/",
        "https://acme.test.evil.example/",
        "https://a.b.acme.test/",
    ):
        r = await fetch(client, web, url)
        assert r.status_code == 403, r.text
        assert r.json()["code"] == "web_fetch_refused"
        assert r.json()["details"]["reason"] == "domain_not_allowed"
    assert not any(
        host.endswith("example") or host == "a.b.acme.test" for host, _ in resolver.asked
    )


async def test_web_fetch_never_follows_a_redirect_inside(
    client: httpx.AsyncClient, web: dict[str, str], pages: Pages, resolver: StaticResolver
) -> None:
    base = f"http://{DOCS}:{pages.server.port}"
    inner = await fetch(client, web, f"{base}/to-inner")
    assert inner.status_code == 403, inner.text
    assert inner.json()["details"]["reason"] == "address_forbidden"
    assert (INNER, 443) in resolver.asked  # looked up, refused before any connection
    metadata = await fetch(client, web, f"{base}/to-metadata")
    assert metadata.status_code == 403, metadata.text
    assert metadata.json()["details"]["reason"] == "domain_not_allowed"
    assert not any(host.startswith("169.254") for host, _ in resolver.asked)
    direct = await fetch(client, web, f"https://{INNER}/admin")
    assert direct.json()["details"]["reason"] == "address_forbidden"
    loop = await fetch(client, web, f"{base}/loop")
    assert loop.json()["details"]["reason"] == "too_many_redirects"
    assert pages.seen.count("/loop") == 6


async def test_web_fetch_refuses_a_huge_body_and_a_web_tool_the_org_did_not_enable(
    client: httpx.AsyncClient, orgs: Orgs, web: dict[str, str], pages: Pages
) -> None:
    base = f"http://{DOCS}:{pages.server.port}"
    big = await fetch(client, web, f"{base}/big")
    assert big.status_code == 403, big.text
    assert big.json()["details"]["reason"] == "too_large"
    assert "x" * 100 not in big.text
    missing = await fetch(client, web, f"{base}/nothing")
    assert missing.status_code == 502 and missing.json()["code"] == "upstream_error"
    r = await client.put(
        f"/orgs/{orgs.org_a}/tool-permissions/web",
        json={"enabled": False},
        headers=orgs.admin_a.headers,
    )
    assert r.status_code == 200, r.text
    off = await fetch(client, web, f"{base}/hello")
    assert off.status_code == 403 and off.json()["code"] == "tool_not_permitted"
