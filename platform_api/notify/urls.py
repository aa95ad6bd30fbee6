"""Where a webhook may point: the upstreams' egress rules (`tools.upstreams.egress`)
without their per-integration host allowlist (a receiver may be any public host).

`https` only, no user name or password, no fragment or query; an IP literal or a name resolving to
a loopback, private, link-local, metadata or otherwise non-public address is refused; the
exceptions are exactly those of `HUMANWORK_UPSTREAM_ALLOWED_ENDPOINTS` (development and
tests: local receivers may use plain http). The same checks run again at connect time
(the egress client), so a name re-resolved to an internal address is refused then too.
"""

from __future__ import annotations

import ipaddress

from platform_api.tools.upstreams.egress import (
    AddressForbidden,
    Egress,
    check_addresses,
    forbidden_reason,
    split_url,
)
from platform_api.tools.upstreams.errors import EgressRefused

FIELD = "url"
TOOL = "webhook"


def _refuse(reason: str, message: str) -> EgressRefused:
    refused = EgressRefused(TOOL, FIELD, reason, message)
    refused.status_code = 422
    return refused


def _parts(url: str) -> tuple[str, str, int]:
    parts, host, port = split_url(url, TOOL, FIELD)
    return parts.scheme, host.lower(), port


def _literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


async def check_webhook_url(url: str, egress: Egress) -> str:
    """`url` stripped when a webhook may point there; `EgressRefused` (422) otherwise."""
    try:
        scheme, host, port = _parts(url)
    except EgressRefused as exc:
        exc.status_code = 422
        raise
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
