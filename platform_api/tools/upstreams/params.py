"""Parameter and credential checks shared by the upstream adapters: each raises
`InvalidParams` or `MissingCredentials` naming the parameter or field, never a value."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import httpx

from platform_api.tools.upstreams import egress
from platform_api.tools.upstreams.errors import InvalidParams, MissingCredentials


def param_int(
    params: Mapping[str, Any],
    name: str,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    default: int | None = None,
) -> int:
    """An integer parameter (an int, or a string of digits); InvalidParams otherwise."""
    raw = params.get(name)
    if raw is None:
        if default is None:
            raise InvalidParams(f"parameter {name!r} is required", details={"param": name})
        return default
    value: int | None = None
    if isinstance(raw, int) and not isinstance(raw, bool):
        value = raw
    elif isinstance(raw, str) and re.fullmatch(r"-?\d{1,20}", raw.strip()):
        value = int(raw.strip())
    if value is None:
        raise InvalidParams(f"parameter {name!r} must be an integer", details={"param": name})
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise InvalidParams(
            f"parameter {name!r} is out of range",
            details={"param": name, "minimum": minimum, "maximum": maximum},
        )
    return value


def param_id(params: Mapping[str, Any], name: str) -> int:
    """A positive numeric id (Shopify's ids), given as an int or a string of digits."""
    return param_int(params, name, minimum=1)


def param_str(
    params: Mapping[str, Any],
    name: str,
    *,
    pattern: str | None = None,
    default: str | None = None,
    max_length: int = 200,
) -> str:
    """A non-empty string parameter, optionally matching `pattern` in full."""
    raw = params.get(name)
    if raw is None:
        if default is None:
            raise InvalidParams(f"parameter {name!r} is required", details={"param": name})
        return default
    if not isinstance(raw, str) or not raw or len(raw) > max_length:
        raise InvalidParams(
            f"parameter {name!r} must be a non-empty string of at most {max_length} characters",
            details={"param": name},
        )
    if pattern is not None and not re.fullmatch(pattern, raw):
        raise InvalidParams(f"parameter {name!r} has an invalid format", details={"param": name})
    return raw


def param_datetime(params: Mapping[str, Any], name: str) -> str | None:
    """An optional ISO 8601 date-time parameter, passed on as given once it parses."""
    raw = params.get(name)
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise InvalidParams(
            f"parameter {name!r} must be an ISO 8601 date-time", details={"param": name}
        )
    try:
        datetime.fromisoformat(raw)
    except ValueError:
        raise InvalidParams(
            f"parameter {name!r} must be an ISO 8601 date-time", details={"param": name}
        ) from None
    return raw


def param_list(
    params: Mapping[str, Any], name: str, *, pattern: str, max_items: int = 50
) -> list[str] | None:
    """An optional list parameter (a list, or a comma-separated string) whose items
    each match `pattern` in full; None when absent."""
    raw = params.get(name)
    if raw is None:
        return None
    items: list[Any]
    if isinstance(raw, str):
        items = [part.strip() for part in raw.split(",") if part.strip()]
    elif isinstance(raw, list | tuple):
        items = list(raw)
    else:
        items = [raw]
    out: list[str] = []
    for item in items:
        text = str(item) if isinstance(item, int) and not isinstance(item, bool) else item
        if not isinstance(text, str) or not re.fullmatch(pattern, text):
            raise InvalidParams(f"parameter {name!r} has an invalid item", details={"param": name})
        out.append(text)
    if not out or len(out) > max_items:
        raise InvalidParams(
            f"parameter {name!r} must hold 1 to {max_items} items", details={"param": name}
        )
    return out


def credential(credentials: Mapping[str, Any], *names: str) -> str | None:
    """The first non-empty string among the credential fields `names` (aliases)."""
    for name in names:
        value = credentials.get(name)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def require_credential(credentials: Mapping[str, Any], tool: str, *names: str) -> str:
    """Like `credential`, but MissingCredentials (naming the field, never a value) when
    none is set."""
    value = credential(credentials, *names)
    if value is None:
        raise MissingCredentials(
            f"the {tool} integration has no {names[0]}",
            details={"tool": tool, "field": names[0]},
        )
    return value


def base_url(
    value: str, tool: str, client: httpx.AsyncClient | None = None, field: str = "baseUrl"
) -> str:
    """A base URL without a trailing slash, checked at call time against the endpoint
    rules of `egress.check_url` for integration type `tool` and the policy `client`
    enforces (none allowed when it is not an `EgressClient`); `EgressRefused` when the
    platform may not call it."""
    return egress.check_url(value, tool, field, egress.policy_of(client))
