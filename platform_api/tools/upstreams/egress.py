"""Where the tool proxy may connect: the per-integration host allowlist, the URL rules,
and an httpx transport that checks the address it actually connects to.

An org admin stores the integrations' `baseUrl`/`tokenUrl`/`shopDomain`; whoever holds
`tools.manage` would otherwise point the platform's own network position at the cloud
metadata service, the Kubernetes API or a database in the cluster (SSRF). So:

- `check_url` (store time and call time): http(s) only, https unless the endpoint is
  explicitly allowed; no userinfo, fragment or query; an IP literal only when the
  setting allows it; a host name only when the integration type's allowlist
  (`UPSTREAM_HOSTS`, the one place it is kept) matches it.
- `check_addresses`: the addresses a host name resolves to must all be public
  (`forbidden_reason`: loopback, private, link-local, carrier-grade NAT, unique-local,
  multicast, reserved and documentation ranges, and IPv4 embedded in IPv6 in any of
  those), unless the setting allows the address.
- `EgressTransport`: resolves each host itself at connect time, checks every address,
  and connects to the checked address (never resolving the name again), so a name that
  re-resolves to an internal address after the store-time check (DNS rebinding) is
  refused before any packet is sent to it. It never uses proxies from the environment.
- `EgressClient` keeps no state between calls, so one org's call leaves nothing another
  org's (or its own next) call could see or send: no cookie jar (`NoCookieJar`: a
  `Set-Cookie` is never stored, so never sent again) and no connection kept alive (each
  call opens its own connection and closes it after the answer).

The exception for local fakes is `HUMANWORK_UPSTREAM_ALLOWED_ENDPOINTS` (`EgressPolicy`):
`host:port` pairs and CIDRs, for development and tests only.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import re
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.cookiejar import Cookie, CookieJar
from typing import Annotated, Any
from urllib.parse import SplitResult, urlsplit

import httpcore
import httpx
from fastapi import Depends

from platform_api.slots import Slot
from platform_api.tools.upstreams.errors import EgressRefused

log = logging.getLogger(__name__)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Awaitable[list[str]]]
"""`(host, port) -> addresses`; raises OSError when the name does not resolve."""

UPSTREAM_HOSTS: Mapping[str, tuple[str, ...]] = {
    "shopify": ("*.myshopify.com",),
    "amazon": (
        "sellingpartnerapi-na.amazon.com",
        "sellingpartnerapi-eu.amazon.com",
        "sellingpartnerapi-fe.amazon.com",
        "sandbox.sellingpartnerapi-na.amazon.com",
        "sandbox.sellingpartnerapi-eu.amazon.com",
        "sandbox.sellingpartnerapi-fe.amazon.com",
        "api.amazon.com",  # Login with Amazon: the token endpoint
    ),
}
"""The hosts each integration type may reach; `*.` matches exactly one DNS label."""

URL_FIELDS: Mapping[str, tuple[str, ...]] = {
    "shopify": ("baseUrl", "base_url"),
    "amazon": ("baseUrl", "base_url", "tokenUrl", "token_url"),
}
HOST_FIELDS: Mapping[str, tuple[str, ...]] = {"shopify": ("shopDomain", "shop", "shop_domain")}

_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


# ---------------------------------------------------------------- addresses


def _embedded_v4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def forbidden_reason(address: IPAddress) -> str | None:
    """Why the platform must not connect to `address` (None when it is public)."""
    if isinstance(address, ipaddress.IPv6Address):
        inner = _embedded_v4(address)
        if inner is not None and forbidden_reason(inner) is not None:
            return f"embeds {inner}, {forbidden_reason(inner)}"
    checks = (
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("private", address.is_private),
        ("unspecified", address.is_unspecified),
        ("multicast", address.is_multicast),
        ("reserved", address.is_reserved),
        ("not global", not address.is_global),
    )
    return next((name for name, hit in checks if hit), None)


def _ip(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


# ---------------------------------------------------------------- the setting


@dataclass(frozen=True)
class EgressPolicy:
    """The exceptions `HUMANWORK_UPSTREAM_ALLOWED_ENDPOINTS` grants: `host:port` pairs
    (a name or an address, `[v6]:port`) and CIDRs (any port). An allowed endpoint may
    use plain http and need not be on the type's allowlist; an allowed address may be
    connected to although it is not public. Empty (the default): no exception."""

    endpoints: frozenset[tuple[str, int]] = frozenset()
    networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def parse(cls, entries: Iterable[str]) -> EgressPolicy:
        """The policy of the setting's entries; ValueError for an unusable entry."""
        endpoints: set[tuple[str, int]] = set()
        networks: list[IPNetwork] = []
        for raw in entries:
            entry = raw.strip().lower()
            if "/" in entry:
                networks.append(ipaddress.ip_network(entry, strict=False))
                continue
            match = re.fullmatch(r"\[?([^\[\]]+?)\]?:(\d{1,5})", entry)
            if match is None or not 0 < int(match.group(2)) < 65536:
                raise ValueError(f"{raw!r} is neither host:port nor a CIDR")
            endpoints.add((match.group(1).rstrip("."), int(match.group(2))))
        return cls(frozenset(endpoints), tuple(networks))

    def allows_endpoint(self, host: str, port: int) -> bool:
        """Whether the URL `host:port` is exempt from https and the host allowlist."""
        address = _ip(host)
        if address is not None and any(address in n for n in self.networks):
            return True
        return (host, port) in self.endpoints or (
            address is not None and (str(address), port) in self.endpoints
        )

    def allows_address(self, host: str, port: int, address: IPAddress) -> bool:
        """Whether connecting to `address` (resolved from `host`) is allowed although
        it is not public: the name or the address is listed with this port, or the
        address is in an allowed network."""
        return (
            (host, port) in self.endpoints
            or (str(address), port) in self.endpoints
            or any(address in n for n in self.networks)
        )


def policy_of(client: httpx.AsyncClient | None) -> EgressPolicy:
    """The policy the client enforces (an `EgressClient`'s); none allowed otherwise."""
    return client.egress.policy if isinstance(client, EgressClient) else EgressPolicy()


# ---------------------------------------------------------------- URL rules


def host_allowed(integration_type: str, host: str) -> bool:
    """Whether `host` matches the type's allowlist."""
    for pattern in UPSTREAM_HOSTS.get(integration_type, ()):
        if pattern.startswith("*."):
            if re.fullmatch(_LABEL + re.escape(pattern[1:]), host):
                return True
        elif host == pattern:
            return True
    return False


def split_url(url: str, tool: str, field: str) -> tuple[SplitResult, str, int]:
    """The URL's parts, host and port; `EgressRefused` for a URL that is not http(s) with
    a host, or carries userinfo, a fragment or a query."""

    def refuse(reason: str, why: str) -> EgressRefused:
        return EgressRefused(tool, field, reason, f"the {tool} integration's {field} {why}")

    try:
        parts = urlsplit(url.strip())
        port = parts.port
        host = (parts.hostname or "").rstrip(".")
    except ValueError:
        raise refuse("invalid_url", "is not a URL") from None
    if parts.scheme not in ("http", "https") or not host:
        raise refuse("invalid_url", "is not an http(s) URL with a host")
    if "@" in parts.netloc:
        raise refuse("userinfo", "must not carry a user name or password")
    if parts.fragment or "#" in url:
        raise refuse("fragment", "must not carry a fragment")
    if parts.query:
        raise refuse("invalid_url", "must not carry a query")
    return parts, host, port or (443 if parts.scheme == "https" else 80)


def check_url(url: str, tool: str, field: str, policy: EgressPolicy) -> str:
    """`url` without its trailing slash when the platform may call it for an
    integration of type `tool`; `EgressRefused` (with its reason) otherwise."""
    parts, host, port = split_url(url, tool, field)
    if not policy.allows_endpoint(host, port):
        address = _ip(host)
        if address is not None and forbidden_reason(address) is not None:
            raise EgressRefused(
                tool,
                field,
                "address_forbidden",
                f"the {tool} integration's {field} is a {forbidden_reason(address)} address",
            )
        if parts.scheme != "https":
            raise EgressRefused(
                tool, field, "scheme_not_allowed", f"the {tool} integration's {field} must be https"
            )
        if address is not None or not host_allowed(tool, host):
            raise EgressRefused(
                tool,
                field,
                "host_not_allowed",
                f"the {tool} integration's {field} host is not one of "
                f"{', '.join(UPSTREAM_HOSTS.get(tool, ())) or 'the allowed hosts'}",
            )
    return url.strip().rstrip("/")


def check_addresses(
    host: str, port: int, addresses: Iterable[str], policy: EgressPolicy
) -> list[IPAddress]:
    """The parsed `addresses` of `host` when every one may be connected to; raises
    `AddressForbidden` naming the first that may not."""
    checked: list[IPAddress] = []
    for text in addresses:
        address = ipaddress.ip_address(text.split("%", 1)[0])
        reason = forbidden_reason(address)
        if reason is not None and not policy.allows_address(host, port, address):
            raise AddressForbidden(f"{host} resolves to {address} ({reason})")
        checked.append(address)
    return checked


def endpoints_in(integration_type: str, credentials: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The (field, URL) pairs of `credentials` the platform would connect to: the type's
    URL fields and, for any type, every field named like `...url`; the type's host
    fields (as `https://host`) when no URL field overrides them."""
    url_fields = set(URL_FIELDS.get(integration_type, ()))
    found = [
        (key, value)
        for key, value in credentials.items()
        if isinstance(value, str) and (key in url_fields or key.lower().endswith("url"))
    ]
    if not any(key in url_fields for key, _ in found):  # the host is used only without a URL
        found += [
            (key, f"https://{value.strip()}")
            for key, value in credentials.items()
            if isinstance(value, str) and key in HOST_FIELDS.get(integration_type, ())
        ]
    return found


async def check_credentials(
    integration_type: str, credentials: Mapping[str, Any], egress: Egress
) -> None:
    """Store-time check of every endpoint in `credentials`: the URL rules, then the
    addresses the host resolves to now (a name that does not resolve yet is left to the
    connect-time check). A refusal here answers 422: the request's own input is refused."""
    try:
        for key, url in endpoints_in(integration_type, credentials):
            await _check_endpoint(integration_type, key, url, egress)
    except EgressRefused as exc:
        exc.status_code = 422
        raise


async def _check_endpoint(integration_type: str, key: str, url: str, egress: Egress) -> None:
    check_url(url, integration_type, key, egress.policy)
    _, host, port = split_url(url, integration_type, key)
    if _ip(host) is not None:
        addresses = [host.strip("[]")]
    else:
        try:
            addresses = await egress.resolver(host, port)
        except OSError:
            log.info("%s %s: %s does not resolve now", integration_type, key, host)
            return
    try:
        check_addresses(host, port, addresses, egress.policy)
    except AddressForbidden as exc:
        raise EgressRefused(
            integration_type,
            key,
            "address_forbidden",
            f"the {integration_type} integration's {key}: {exc}",
        ) from None


# ---------------------------------------------------------------- connect time


class AddressForbidden(httpcore.ConnectError):
    """Raised by the network backend before connecting to a forbidden address."""


class EgressBlocked(httpx.ConnectError):
    """What the client raises when its transport refused an address or URL (no packet
    was sent to it)."""


async def system_resolver(host: str, port: int) -> list[str]:
    """The addresses of `host` from the system resolver."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """An httpcore network backend that resolves names itself, refuses forbidden
    addresses and connects to the checked address (`inner` makes the socket)."""

    def __init__(
        self,
        policy: EgressPolicy,
        resolver: Resolver,
        inner: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        self.policy = policy
        self.resolver = resolver
        self.inner = inner or httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        host = host.rstrip(".").lower()
        if _ip(host) is not None:
            addresses = [host.strip("[]")]
        else:
            try:
                addresses = await asyncio.wait_for(self.resolver(host, port), timeout)
            except (OSError, TimeoutError) as exc:
                raise httpcore.ConnectError(f"{host} does not resolve: {exc}") from None
        checked = check_addresses(host, port, addresses, self.policy)
        if not checked:
            raise httpcore.ConnectError(f"{host} resolves to no address")
        failure: Exception | None = None
        for address in checked:
            try:
                return await self.inner.connect_tcp(
                    str(address),
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None
        raise failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise AddressForbidden("the tool proxy does not connect to unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class EgressTransport(httpx.AsyncHTTPTransport):
    """httpx's transport over a connection pool whose backend is a `GuardedBackend`,
    refusing URLs with userinfo and plain http to endpoints the policy does not allow."""

    def __init__(
        self,
        policy: EgressPolicy,
        resolver: Resolver,
        *,
        inner: httpcore.AsyncNetworkBackend | None = None,
        verify: ssl.SSLContext | bool = True,
    ) -> None:
        super().__init__(verify=verify, trust_env=False)
        self.policy = policy
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(verify=verify, trust_env=False),
            max_connections=100,
            max_keepalive_connections=0,  # no connection outlives its call
            keepalive_expiry=0.0,
            network_backend=GuardedBackend(policy, resolver, inner),
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        host, port = url.host.lower(), url.port or (443 if url.scheme == "https" else 80)
        if url.userinfo:
            raise EgressBlocked("the URL carries userinfo", request=request)
        if url.scheme != "https" and not self.policy.allows_endpoint(host, port):
            raise EgressBlocked(f"plain {url.scheme} to {host}:{port}", request=request)
        try:
            return await super().handle_async_request(request)
        except httpx.ConnectError as exc:
            if isinstance(exc.__cause__, AddressForbidden):
                log.warning("egress refused: %s", exc.__cause__)
                raise EgressBlocked(str(exc.__cause__), request=request) from None
            raise


@dataclass(frozen=True)
class Egress:
    """The policy and the resolver, shared by the store-time check and the client."""

    policy: EgressPolicy = field(default_factory=EgressPolicy)
    resolver: Resolver = system_resolver


class NoCookieJar(CookieJar):
    """A cookie jar that never stores a cookie: what one upstream sets on one org's call
    never reaches another call."""

    def set_cookie(self, cookie: Cookie) -> None:
        return None

    def extract_cookies(self, response: Any, request: Any) -> None:
        return None


class EgressClient(httpx.AsyncClient):
    """An httpx client whose every connection goes through an `EgressTransport`; the
    adapters read its policy for their call-time URL checks. It shares nothing between
    calls: no cookies (`NoCookieJar`), no kept-alive connection."""

    def __init__(
        self,
        egress: Egress,
        *,
        timeout: float,
        inner: httpcore.AsyncNetworkBackend | None = None,
        verify: ssl.SSLContext | bool = True,
    ) -> None:
        super().__init__(
            transport=EgressTransport(egress.policy, egress.resolver, inner=inner, verify=verify),
            timeout=timeout,
            trust_env=False,
            follow_redirects=False,
            cookies=NoCookieJar(),
        )
        self.egress = egress


EGRESS: Slot[Egress] = Slot("egress")
EgressDep = Annotated[Egress, Depends(EGRESS)]
"""Where integrations may point (checked when credentials are stored)."""
