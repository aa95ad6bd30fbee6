"""The tool proxy's upstream adapters: how the platform calls Shopify and Amazon on an
agent's behalf with the org's decrypted credentials.

`POST /v1/agent-api/tools/{tool}` looks up `adapter_for(tool)`, checks the action's
entry in the action catalog (`humanwork_core.catalog`; a side-effecting one needs an
approved step), decrypts the org's integration of type `adapter.integration_type` and
awaits `adapter.call(...)`. The adapter validates the action and parameters, calls the
upstream (timeouts, retries of idempotent GETs only) and returns a result with every
credential removed (`sanitise`). Failures are `UpstreamError`s (`upstreams.errors`, members
of the platform's one error family) carrying a stable `code` and HTTP status; none of them
carries a credential.
"""

from __future__ import annotations

from functools import cache

from platform_api.tools.upstreams.amazon import AmazonAdapter
from platform_api.tools.upstreams.base import (
    REDACTED,
    Adapter,
    answers,
    is_secret_key,
    sanitise,
)
from platform_api.tools.upstreams.errors import (
    EgressRefused,
    InvalidParams,
    MissingCredentials,
    UnknownAction,
    UnknownTool,
    UpstreamError,
)
from platform_api.tools.upstreams.shopify import ShopifyAdapter
from platform_api.tools.upstreams.web import WebAdapter

__all__ = [
    "REDACTED",
    "Adapter",
    "AmazonAdapter",
    "EgressRefused",
    "InvalidParams",
    "MissingCredentials",
    "ShopifyAdapter",
    "UnknownAction",
    "UnknownTool",
    "UpstreamError",
    "WebAdapter",
    "adapter_for",
    "answers",
    "is_secret_key",
    "known_tools",
    "sanitise",
]

_ADAPTER_TYPES: dict[str, type[Adapter]] = {
    ShopifyAdapter.tool: ShopifyAdapter,
    AmazonAdapter.tool: AmazonAdapter,
    WebAdapter.tool: WebAdapter,
}


def known_tools() -> tuple[str, ...]:
    """The names of the tools the proxy can call, sorted."""
    return tuple(sorted(_ADAPTER_TYPES))


@cache
def _adapter(tool: str) -> Adapter:
    return _ADAPTER_TYPES[tool]()


def adapter_for(tool: str) -> Adapter:
    """The process-wide adapter of `tool` (one instance per tool, created on first use,
    so Amazon's access tokens are cached across calls); UnknownTool otherwise."""
    if not isinstance(tool, str) or tool not in _ADAPTER_TYPES:
        raise UnknownTool(
            f"no such tool {str(tool)[:100]!r}", details={"known_tools": list(known_tools())}
        )
    return _adapter(tool)
