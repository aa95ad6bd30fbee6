"""The tool proxy's egress, from the attacker's side, through the running platform: an
org's stored Shopify endpoint that leads to an internal service (a fake listening on
127.0.0.2, which the tests' allowed endpoints, 127.0.0.1/32, do not cover) is never
called: a row stored before the URL rules is refused at call time, and a name that
re-resolves to the internal address after it was stored is refused at connect time.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest
from fastapi import FastAPI

from humanwork_dev.fakes.shopify import FakeShopify
from platform_api.models import IntegrationCredential, utcnow
from platform_api.state import Platform
from tests.agents import agent_credentials, provision_agent
from tests.conftest import Cluster
from tests.platform.conftest import StaticResolver
from tests.platform_k8s.conftest import Orgs

PUBLIC = "23.227.38.65"  # only ever answered to the store-time check, never connected to


@pytest.fixture
def internal() -> Iterator[FakeShopify]:
    """An internal service the platform can reach on its network."""
    with FakeShopify(host="127.0.0.2") as fake:
        yield fake


@pytest.fixture
async def agent(client: httpx.AsyncClient, cluster: Cluster, orgs: Orgs) -> dict[str, str]:
    provision_agent(cluster, orgs.ns_a, orgs.org_a)
    r = await client.put(
        f"/orgs/{orgs.org_a}/tool-permissions/shopify",
        json={"enabled": True},
        headers=orgs.admin_a.headers,
    )
    assert r.status_code == 200, r.text
    token, _ = agent_credentials(cluster, orgs.ns_a)
    return {"Authorization": f"Bearer {token}"}


async def _list_products(client: httpx.AsyncClient, headers: dict[str, str]) -> httpx.Response:
    body = {"action": "listProducts", "params": {}}
    return await client.post("/v1/agent-api/tools/shopify", json=body, headers=headers)


async def test_a_stored_internal_endpoint_is_refused_when_the_agent_calls(
    app: FastAPI,
    client: httpx.AsyncClient,
    orgs: Orgs,
    agent: dict[str, str],
    internal: FakeShopify,
) -> None:
    platform: Platform = app.state.platform
    assert platform.cipher is not None
    org = uuid.UUID(orgs.org_a)
    sealed = platform.cipher.seal(org, "shopify", json.dumps(internal.credentials()).encode())
    async with platform.sessions() as session, session.begin():  # as before the URL rules
        session.add(
            IntegrationCredential(
                org_id=org,
                type="shopify",
                key_id=sealed.key_id,
                nonce=sealed.nonce,
                ciphertext=sealed.ciphertext,
                updated_at=utcnow(),
                updated_by="legacy",
            )
        )
    r = await _list_products(client, agent)
    assert r.status_code == 409, r.text
    refused = r.json()
    assert refused["code"] == "integration_endpoint_refused" and "baseUrl" in refused["message"]
    assert refused["details"] == {"field": "baseUrl", "reason": "address_forbidden"}
    assert internal.requests == []


async def test_a_name_rebound_to_an_internal_address_is_refused_at_connect_time(
    client: httpx.AsyncClient,
    orgs: Orgs,
    agent: dict[str, str],
    internal: FakeShopify,
    resolver: StaticResolver,
) -> None:
    port = urlsplit(internal.url).port
    resolver.names["rebind.myshopify.com"] = [PUBLIC]
    creds = internal.credentials(baseUrl=f"https://rebind.myshopify.com:{port}")
    r = await client.put(
        f"/orgs/{orgs.org_a}/integrations/shopify",
        json={"credentials": creds},
        headers=orgs.admin_a.headers,
    )
    assert r.status_code == 200, r.text  # a public address when stored
    resolver.names["rebind.myshopify.com"] = ["127.0.0.2"]
    r = await _list_products(client, agent)
    assert r.status_code == 502, r.text
    assert r.json()["code"] == "upstream_error"
    assert internal.requests == []
    assert resolver.asked[-1] == ("rebind.myshopify.com", port)
