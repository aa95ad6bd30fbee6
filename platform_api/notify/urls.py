"""Where a webhook may point: the upstreams' egress rules (`tools.upstreams.egress`)
without their per-integration host allowlist (a receiver may be any public host).

`https` only, no user name or password, no fragment; an IP literal or a name resolving to
a loopback, private, link-local, metadata or otherwise non-public address is refused; the
exceptions are exactly those of `HUMANWORK_UPSTREAM_ALLOWED_ENDPOINTS` (development and
tests: local receivers may use plain http). The same checks run again at connect time
(the egress client), so a name re-resolved to an internal address is refused then too.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from platform_api.tools.upstreams.egress import (
    AddressForbidden,
    Egress,
    check_addresses,
    forbidden_reason,
)
from platform_api.tools.upstreams.errors import EgressRefused

FIELD = "url"
TOOL = "webhook"


def _refuse(reason: str, message: str) -> EgressRefused:
    refused = EgressRefused(TOOL, FIELD, reason, message)
    refused.status_code = 422
    return refused


def _parts(url: str) -> tuple[str, str, int]:
    try:
        parts = urlsplit(url.strip())
        host = (parts.hostname or "").rstrip(".").lower()
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise _refuse("invalid_url", "the webhook URL is not a URL") from None
    if parts.scheme not in ("http", "https") or not host:
        raise _refuse("invalid_url", "the webhook URL is not an http(s) URL with a host")
    if "@" in parts.netloc:
        raise _refuse("userinfo", "the webhook URL must not carry a user name or password")
    if parts.fragment or "#" in url:
        raise _refuse("fragment", "the webhook URL must not carry a fragment")
    return parts.scheme, host, port


def _literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


async def check_webhook_url(url: str, egress: Egress) -> str:
    """`url` stripped when a webhook may point there; `EgressRefused` (422) otherwise."""
    scheme, host, port = _parts(url)
    policy = egress.policy
    allowed = policy.allows_endpoint(host, port)
    address = _literal(host)
    if not allowed and address is not None and forbidden_reason(address) is not None:
        raise _refuse(
            "address_forbidden", f"the webhook URL is a {forbidden_reason(address)} address"
        )
    if not allowed and scheme != "https":
        raise _refuse("scheme_not_allowed", "the webhook URL must be https")
    try:
        addresses = [host.strip("[]")] if address is not None else await egress.resolver(host, port)
    except OSError:
        return url.strip()  # not resolvable now: the connect-time check decides
    try:
        check_addresses(host, port, addresses, policy)
    except AddressForbidden as exc:
        raise _refuse("address_forbidden", f"the webhook URL: {exc}") from None
    return url.strip()
