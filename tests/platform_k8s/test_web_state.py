"""No state shared between orgs in the tool proxy: a site that sets a cookie on org A's
`web.fetch` never gets it back, neither from org B's fetch nor from A's own next one, and
no call rides on a connection another call opened.

The site is a local HTTP server on loopback that records, for every request, the Cookie
header it carried and the client port it came from (one port, one TCP connection). Names
resolve through the test's resolver only (`docs.acme.test` -> 127.0.0.1).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from humanwork_dev.fakes.server import BackgroundServer
from platform_api.settings import Settings
from tests.agents import agent_credentials, provision_agent
from tests.conftest import Cluster
from tests.platform.conftest import StaticResolver, make_settings
from tests.platform_k8s.conftest import Orgs
from tests.platform_k8s.test_tool_limits import DOCS, configure
from tests.platform_k8s.test_tool_proxy import call

SECRET = "org-a-session-4f1c"


@dataclass
class Seen:
    path: str
    cookie: str | None
    port: int


class CookieSite:
    """`/login` sets a session cookie; every path records what it was sent."""

    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self.server = BackgroundServer(Starlette(routes=[Route("/{path:path}", self.page)]))

    async def page(self, request: Request) -> Response:
        client = request.client
        self.seen.append(
            Seen(request.url.path, request.headers.get("cookie"), client.port if client else 0)
        )
        response = PlainTextResponse("hello")
        if request.url.path == "/login":
            response.set_cookie("session", SECRET, path="/")
        return response


@pytest.fixture(scope="module")
def site() -> Iterator[CookieSite]:
    made = CookieSite()
    made.server.start()
    yield made
    made.server.stop()


@pytest.fixture
def settings(database_url: str, platform_kubeconfig: Path, site: CookieSite) -> Settings:
    return make_settings(
        database_url,
        kubeconfig=str(platform_kubeconfig),
        upstream_allowed_endpoints=["127.0.0.1/32", f"{DOCS}:{site.server.port}"],
    )


@pytest.fixture
def resolver() -> StaticResolver:
    return StaticResolver({DOCS: ["127.0.0.1"]})


async def web_agent(
    client: httpx.AsyncClient, cluster: Cluster, orgs: Orgs, ns: str, org: str, admin: str
) -> dict[str, str]:
    provision_agent(cluster, ns, org, enabledTools=["web"])
    caller = orgs.admin_a if admin == "a" else orgs.admin_b
    r = await configure(client, caller, org, "web", {"allowedDomains": [DOCS]})
    assert r.status_code == 200, r.text
    token, _ = agent_credentials(cluster, ns)
    return {"Authorization": f"Bearer {token}"}


async def test_a_cookie_set_on_one_orgs_fetch_is_never_sent_again(
    client: httpx.AsyncClient, cluster: Cluster, orgs: Orgs, site: CookieSite
) -> None:
    agent_a = await web_agent(client, cluster, orgs, orgs.ns_a, orgs.org_a, "a")
    agent_b = await web_agent(client, cluster, orgs, orgs.ns_b, orgs.org_b, "b")
    base = f"http://{DOCS}:{site.server.port}"
    site.seen.clear()
    for headers, path in ((agent_a, "/login"), (agent_a, "/again"), (agent_b, "/other-org")):
        r = await call(client, headers, "fetch", {"url": f"{base}{path}"}, tool="web")
        assert r.status_code == 200, r.text
        assert r.json()["result"]["text"] == "hello"  # the positive control: each fetch ran
        assert SECRET not in r.text
    assert [s.path for s in site.seen] == ["/login", "/again", "/other-org"]
    assert [s.cookie for s in site.seen] == [None, None, None]
    # each call on a connection of its own: nothing one call left open serves the next
    assert len({s.port for s in site.seen}) == 3
