"""The client address of a request: `X-Forwarded-For` believed only through trusted
proxies, read from the right; an untrusted peer's header ignored."""

from __future__ import annotations

import pytest
from starlette.requests import Request

from platform_api.auth.clients import TrustedProxies
from platform_api.settings import Settings


def _request(peer: str | None, *forwarded: str) -> Request:
    headers = [(b"x-forwarded-for", value.encode()) for value in forwarded]
    scope = {"type": "http", "headers": headers, "client": (peer, 4000) if peer else None}
    return Request(scope)


PROXIES = TrustedProxies(["10.9.0.0/16", "fd00::/8"])


@pytest.mark.parametrize(
    ("peer", "forwarded", "client"),
    [
        ("198.51.100.7", ("192.0.2.1",), "198.51.100.7"),  # untrusted peer: header ignored
        ("198.51.100.7", (), "198.51.100.7"),
        ("10.9.0.4", ("192.0.2.1",), "192.0.2.1"),  # the proxy's word
        ("10.9.0.4", ("203.0.113.9, 192.0.2.1",), "192.0.2.1"),  # a prepended hop ignored
        ("10.9.0.4", ("203.0.113.9, 192.0.2.1, 10.9.0.8",), "192.0.2.1"),  # two proxies
        ("10.9.0.4", ("203.0.113.9", "192.0.2.1"), "192.0.2.1"),  # two header lines
        ("10.9.0.4", ("10.9.0.7, 10.9.0.8",), "10.9.0.7"),  # all trusted: the left-most
        ("10.9.0.4", ("not-an-address",), "10.9.0.4"),  # garbage: the proxy itself
        ("10.9.0.4", (), "10.9.0.4"),
        ("fd00::1", ("2001:db8::5",), "2001:db8::5"),
        ("::ffff:10.9.0.4", ("192.0.2.1",), "192.0.2.1"),  # IPv4-mapped peer
        (None, ("192.0.2.1",), "unknown"),
    ],
)
def test_the_client_is_read_from_the_right_through_trusted_hops(
    peer: str | None, forwarded: tuple[str, ...], client: str
) -> None:
    assert PROXIES.client_of(_request(peer, *forwarded)) == client


def test_without_trusted_proxies_the_peer_is_the_client() -> None:
    assert TrustedProxies([]).client_of(_request("10.9.0.4", "192.0.2.1")) == "10.9.0.4"


def test_a_bad_cidr_is_refused_by_the_settings() -> None:
    with pytest.raises(ValueError, match="not an IP address or CIDR"):
        Settings(trusted_proxies=["10.0.0.0/8", "ingress"])
