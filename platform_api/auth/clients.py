"""The client address of a request: the socket peer, or, when the peer is a configured
trusted proxy (`HUMANWORK_TRUSTED_PROXIES`), the address that proxy saw, read from
`X-Forwarded-For`.

The header is read from the right, one hop at a time, and only while the hop that
appended it is trusted: the first address not in a trusted range is the client. An
untrusted peer's `X-Forwarded-For` is ignored entirely, so a client cannot choose the
address its sign-ins are counted against by sending the header itself; nor can a client
behind a trusted proxy, since only the hops the trusted proxies appended are believed.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from starlette.requests import Request

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address
UNKNOWN = "unknown"


def _address(text: str) -> Address | None:
    try:
        address = ipaddress.ip_address(text.strip())
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


class TrustedProxies:
    """The configured proxy ranges and the client address they vouch for."""

    def __init__(self, cidrs: Iterable[str]) -> None:
        self.networks: tuple[Network, ...] = tuple(
            ipaddress.ip_network(c, strict=False) for c in cidrs
        )

    def trusts(self, address: Address) -> bool:
        """Whether `address` is one of the trusted proxies."""
        return any(address.version == n.version and address in n for n in self.networks)

    def client_of(self, request: Request) -> str:
        """The client address of `request` (`unknown` without a peer)."""
        peer = request.client.host if request.client else None
        if peer is None:
            return UNKNOWN
        current = _address(peer)
        if current is None:
            return peer
        if not self.networks:
            return str(current)
        hops = [h for v in request.headers.getlist("x-forwarded-for") for h in v.split(",")]
        for hop in reversed(hops):
            if not self.trusts(current):
                break
            address = _address(hop)
            if address is None:
                break
            current = address
        return str(current)
