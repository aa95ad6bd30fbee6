"""The tool proxy's egress, from the attacker's side, through the running platform: an
org's stored Shopify endpoint that leads to an internal service (a fake listening on
127.0.0.2, which the tests' allowed endpoints, 127.0.0.1/32, do not cover) is never
called: a row stored before the URL rules is refused at call time, and a name that
re-resolves to the internal address after it was stored is refused at connect time.

The connect-time case watches TCP connections, not HTTP requests: a TLS handshake to a
plain-HTTP fake fails with the same 502 as a refusal and the fake's HTTP ledger stays
empty either way, so a `ConnectionLedger` (a listener that records every connection it
accepts, whatever the caller speaks) proves that no packet reached the internal address,
and the same path is shown to reach an allowed address first.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import uuid
from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI

from humanwork_dev.fakes.shopify import FakeShopify
from platform_api.db import SESSIONS
from platform_api.integrations.crypto import CIPHER
from platform_api.models import IntegrationCredential, utcnow
from tests.agents import agent_credentials, provision_agent
from tests.conftest import Cluster
from tests.platform.conftest import StaticResolver
from tests.platform_k8s.conftest import Orgs

PUBLIC = "23.227.38.65"  # only ever answered to the store-time check, never connected to


class ConnectionLedger:
    """A TCP listener on `host` that records the peer of every connection it accepts and
    closes it at once (whatever protocol the caller speaks: HTTP, a TLS handshake)."""

    def __init__(self, host: str, port: int = 0) -> None:
        self.accepted: list[tuple[str, int]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.bind((host, port))
        self._socket.listen(16)
        self._socket.settimeout(0.1)  # how soon `close` is noticed, not a wait of the test
        self.port: int = self._socket.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, peer = self._socket.accept()
            except TimeoutError:
                continue
            with self._lock:  # recorded before the caller can see the connection end
                self.accepted.append(peer)
            conn.close()

    def connections(self) -> list[tuple[str, int]]:
        with self._lock:
            return list(self.accepted)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._socket.close()


@pytest.fixture
def listeners() -> Iterator[tuple[ConnectionLedger, ConnectionLedger]]:
    """Two listeners on one port: on 127.0.0.2 (internal: not an allowed endpoint) and on
    127.0.0.1 (an allowed endpoint of the tests' settings)."""
    for _ in range(20):
        internal = ConnectionLedger("127.0.0.2")
        try:
            allowed = ConnectionLedger("127.0.0.1", internal.port)
        except OSError:  # the port is taken on 127.0.0.1: another pair
            internal.close()
            continue
        break
    else:
        raise AssertionError("no port free on both 127.0.0.1 and 127.0.0.2")
    yield internal, allowed
    internal.close()
    allowed.close()


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
    cipher = CIPHER.of(app.state)
    assert cipher is not None
    org = uuid.UUID(orgs.org_a)
    sealed = cipher.seal(org, "shopify", json.dumps(internal.credentials()).encode())
    async with SESSIONS.of(app.state)() as session, session.begin():  # as before the URL rules
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
    listeners: tuple[ConnectionLedger, ConnectionLedger],
    resolver: StaticResolver,
    caplog: pytest.LogCaptureFixture,
) -> None:
    internal, allowed = listeners
    port = internal.port
    resolver.names["rebind.myshopify.com"] = [PUBLIC]
    creds = {
        "shopDomain": "rebind.myshopify.com",
        "accessToken": "shpat_fake_0123456789abcdef0123456789",
        "baseUrl": f"https://rebind.myshopify.com:{port}",
    }
    r = await client.put(
        f"/orgs/{orgs.org_a}/integrations/shopify",
        json={"credentials": creds},
        headers=orgs.admin_a.headers,
    )
    assert r.status_code == 200, r.text  # a public address when stored

    # the positive control: resolved to an allowed address, the same call connects there
    resolver.names["rebind.myshopify.com"] = ["127.0.0.1"]
    r = await _list_products(client, agent)
    assert r.status_code == 502, r.text  # the listener closes without a TLS answer
    assert allowed.connections(), "the call never connected to the allowed address"
    assert internal.connections() == []

    # rebound to the internal address: refused before any connection is made
    resolver.names["rebind.myshopify.com"] = ["127.0.0.2"]
    caplog.set_level(logging.WARNING, logger="platform_api.tools.upstreams.egress")
    r = await _list_products(client, agent)
    assert r.status_code == 502, r.text
    refused = r.json()
    assert refused["code"] == "upstream_error"
    assert refused["details"]["outcome"] == "not_sent"
    assert internal.connections() == []
    assert resolver.asked[-1] == ("rebind.myshopify.com", port)
    reasons = [
        rec.getMessage()
        for rec in caplog.records
        if rec.name == "platform_api.tools.upstreams.egress"
    ]
    assert "egress refused: rebind.myshopify.com resolves to 127.0.0.2 (loopback)" in reasons
