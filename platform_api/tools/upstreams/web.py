"""The `web` tool's adapter: `web.fetch`, a read-only GET of one page (UC-8).

It has no credentials: what the proxy hands it in their place is the org's tool config and
the platform's limits (`WebLimits.options`). A page is fetched only when its URL's host is
on the org's `allowedDomains`, with no userinfo, over https (plain http only to an endpoint
`HUMANWORK_UPSTREAM_ALLOWED_ENDPOINTS` allows, as for every integration). Redirects are
followed by hand, at most `MAX_REDIRECTS`, each target checked like the first URL. The
platform's egress client resolves every host itself and refuses private, loopback,
link-local and metadata addresses at connect time (`upstreams.egress`), so a name that
resolves inside, or a redirect there, never gets a connection. The body is read up to
`maxBytes` (refused beyond), the whole call within `timeoutSeconds`.

Refusals answer 403 `web_fetch_refused` with `details.reason`: `domain_not_allowed`,
`scheme_not_allowed`, `userinfo`, `invalid_url`, `address_forbidden`, `too_many_redirects`
or `too_large`. An error status of the page fails as `upstream_error`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import urljoin, urlsplit

import httpx

from humanwork_core import catalog
from platform_api.tools.config import ToolConfig
from platform_api.tools.upstreams.base import Adapter, Exchange, note_answer
from platform_api.tools.upstreams.egress import EgressBlocked
from platform_api.tools.upstreams.errors import UpstreamError

MAX_REDIRECTS = 5
REDIRECTS = frozenset({301, 302, 303, 307, 308})


class WebFetchRefused(UpstreamError):
    """The platform would not fetch the page (see the module docstring for the reasons)."""

    code = "web_fetch_refused"
    status_code = 403

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message, details={"reason": reason})
        self.reason = reason

    def public_details(self) -> dict[str, Any]:
        return {"reason": self.reason}


@dataclass(frozen=True)
class WebLimits:
    """The platform's limits of `web.fetch` (settings `web_fetch_*`)."""

    max_bytes: int = 1_048_576
    timeout_seconds: float = 10.0

    def options(self, config: ToolConfig) -> dict[str, Any]:
        """What the adapter receives in place of credentials."""
        return {
            "allowedDomains": list(config.allowed_domains),
            "maxBytes": self.max_bytes,
            "timeoutSeconds": self.timeout_seconds,
        }


def check_target(url: str, config: ToolConfig) -> str:
    """`url` when the org may fetch it; WebFetchRefused otherwise (before any lookup)."""
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
    except ValueError:
        raise WebFetchRefused("invalid_url", "the URL does not parse") from None
    if parts.scheme not in ("https", "http") or not host:
        raise WebFetchRefused("scheme_not_allowed", "only http(s) URLs with a host are fetched")
    if parts.username is not None or parts.password is not None:
        raise WebFetchRefused("userinfo", "the URL carries userinfo")
    if not config.allows_host(host):
        raise WebFetchRefused("domain_not_allowed", f"{host} is not on the org's allowedDomains")
    return parts._replace(fragment="").geturl()


def _blocked(exc: EgressBlocked) -> WebFetchRefused:
    text = str(exc)
    if text.startswith("plain "):
        return WebFetchRefused("scheme_not_allowed", f"refused: {text}")
    if "userinfo" in text:
        return WebFetchRefused("userinfo", "the URL carries userinfo")
    return WebFetchRefused("address_forbidden", f"refused: {text}")


class WebAdapter(Adapter):
    """`web.fetch` (see the module docstring)."""

    tool: ClassVar[str] = "web"
    integration_type: ClassVar[str] = "web"
    needs_credentials: ClassVar[bool] = False
    public_credential_fields: ClassVar[frozenset[str]] = frozenset(
        {"allowedDomains", "maxBytes", "timeoutSeconds"}
    )

    async def perform(
        self,
        spec: catalog.Action,
        params: dict[str, Any],
        credentials: Mapping[str, Any],
        exchange: Exchange,
    ) -> dict[str, Any]:
        config = ToolConfig(allowedDomains=tuple(credentials.get("allowedDomains") or ()))
        limit = int(credentials.get("maxBytes") or 1_048_576)
        seconds = float(credentials.get("timeoutSeconds") or 10.0)
        url = check_target(str(params["url"]), config)
        try:
            async with asyncio.timeout(seconds):
                return await self._follow(exchange.client, url, config, limit, seconds)
        except TimeoutError:
            raise UpstreamError(
                f"the page did not arrive within {seconds:g}s", status=504
            ) from None
        except EgressBlocked as exc:
            raise _blocked(exc) from None
        except httpx.HTTPError as exc:
            raise UpstreamError(f"the page could not be fetched: {type(exc).__name__}") from None

    async def _follow(
        self, client: httpx.AsyncClient, url: str, config: ToolConfig, limit: int, seconds: float
    ) -> dict[str, Any]:
        for _ in range(MAX_REDIRECTS + 1):
            request = client.build_request("GET", url, timeout=seconds)
            response = await client.send(request, stream=True)
            note_answer(response.status_code)
            try:
                location = response.headers.get("location")
                if response.status_code in REDIRECTS and location:
                    url = check_target(urljoin(url, location), config)
                    continue
                if response.status_code >= 400:
                    raise UpstreamError(
                        f"the page answered {response.status_code}",
                        status=response.status_code if response.status_code == 404 else 502,
                        details={"upstream_status": response.status_code},
                    )
                body = await _read(response, limit)
            finally:
                await response.aclose()
            return {
                "url": url,
                "status": response.status_code,
                "contentType": response.headers.get("content-type", ""),
                "bytes": len(body),
                "text": body.decode(response.encoding or "utf-8", errors="replace"),
            }
        raise WebFetchRefused("too_many_redirects", f"more than {MAX_REDIRECTS} redirects")


async def _read(response: httpx.Response, limit: int) -> bytes:
    """The body, or WebFetchRefused(`too_large`) as soon as it passes `limit` bytes."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise WebFetchRefused("too_large", f"the page is {declared} bytes; the limit is {limit}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            raise WebFetchRefused("too_large", f"the page passes the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)
