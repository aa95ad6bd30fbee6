"""Read-only checks that settle an unknown outcome where the action's nature allows it.

When the proxy cannot tell whether a write took effect, most actions need a human: an
adjustment by a delta cannot be told apart from someone else's change. An action that
sets an absolute value can be read back: if the upstream now holds exactly the value the
approved step set, the write happened (and repeating it would change nothing), so the
step is settled as applied with what was read. Anything else (another value, a failed
read, a target the parameters do not name exactly) stays unknown for an expert.

Today: Shopify `setInventoryLevel` naming `inventory_item_id` and `location_id`, read back
with `getInventoryLevels`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from platform_api.tools import upstreams

ReadBack = Callable[
    [upstreams.Adapter, dict[str, Any], dict[str, Any], Any], Awaitable[dict[str, Any] | None]
]


def _as_int(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    return None


async def _shopify_set_level(
    adapter: upstreams.Adapter, params: dict[str, Any], credentials: dict[str, Any], http: Any
) -> dict[str, Any] | None:
    item = _as_int(params.get("inventory_item_id"))
    location = _as_int(params.get("location_id"))
    wanted = _as_int(params.get("available"))
    if item is None or location is None or wanted is None:
        return None
    read = await adapter.call(
        "getInventoryLevels",
        {"inventory_item_ids": [str(item)], "location_ids": [str(location)]},
        credentials,
        client=http,
        idempotency_key="",
    )
    for level in read.get("inventory_levels") or []:
        if (
            isinstance(level, dict)
            and _as_int(level.get("inventory_item_id")) == item
            and _as_int(level.get("location_id")) == location
            and _as_int(level.get("available")) == wanted
        ):
            return {"inventory_level": level, "confirmedByReadBack": True}
    return None


CHECKS: dict[tuple[str, str], ReadBack] = {
    ("shopify", "setInventoryLevel"): _shopify_set_level,
}
"""The actions whose unknown outcome a read can settle, by (tool, action)."""


async def confirm_applied(
    adapter: upstreams.Adapter,
    action: str,
    params: dict[str, Any],
    credentials: dict[str, Any],
    http: Any,
) -> dict[str, Any] | None:
    """The result to settle the step with when a read shows the write applied; None when
    no check applies or the read does not prove it (the outcome stays unknown)."""
    check = CHECKS.get((adapter.tool, action))
    if check is None:
        return None
    try:
        return await check(adapter, params, credentials, http)
    except upstreams.UpstreamError:
        return None
