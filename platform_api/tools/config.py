"""An org's configuration of one tool (`PUT /orgs/{id}/tool-permissions/{tool}`, `config`),
and what the tool proxy enforces of it:

- `allowedActions`: the only actions of the tool the org's agents may call (names from the
  action catalog); absent: every action of the tool;
- `ratePerHour`: the most calls the org's agents make to the tool in one clock hour,
  counted in the database (so across replicas); absent: no limit;
- `allowedDomains` (`web` only): the hosts `web.fetch` may read, `example.com` (that host)
  or `*.example.com` (one label under it); absent or empty: none.

The config is checked when it is set (an unknown key, an action the tool does not have or
a domain that is not a host name answers 422 `invalid_tool_config`), and read again on
every call; a stored config that no longer reads refuses the call (fail closed).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from humanwork_core import catalog
from platform_api.errors import PlatformError

DOMAIN_PATTERN = r"^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$"
_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
DOMAIN_TOOLS = frozenset({"web"})
"""The tools whose config may name domains."""


class InvalidToolConfig(PlatformError):
    """The tool's config names something the proxy cannot enforce; `details.field` says
    which key, `details.unknown` the names it does not know."""

    code = "invalid_tool_config"
    status_code = 422


class ToolConfig(BaseModel):
    """The enforced keys of a tool's config (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    allowed_actions: tuple[str, ...] | None = Field(
        default=None, alias="allowedActions", max_length=100
    )
    rate_per_hour: int | None = Field(default=None, alias="ratePerHour", ge=1, le=1_000_000)
    allowed_domains: tuple[str, ...] = Field(default=(), alias="allowedDomains", max_length=200)

    def allows_action(self, action: str) -> bool:
        """Whether the org lets its agents call `action` of the tool."""
        return self.allowed_actions is None or action in self.allowed_actions

    def allows_host(self, host: str) -> bool:
        """Whether `host` is on the tool's domain allowlist."""
        host = host.lower().rstrip(".")
        for entry in self.allowed_domains:
            if entry.startswith("*."):
                if re.fullmatch(_LABEL + re.escape(entry[1:]), host):
                    return True
            elif host == entry:
                return True
        return False


def _refuse(message: str, **details: Any) -> InvalidToolConfig:
    return InvalidToolConfig(message, **details)


def parse(tool: str, raw: dict[str, Any]) -> ToolConfig:
    """The config of `tool` (a catalog tool's canonical name) from its stored or submitted
    form; InvalidToolConfig for anything the proxy could not enforce."""
    try:
        config = ToolConfig.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "config"
        raise _refuse(f"config.{field}: {first['msg']}", field=field) from None
    known = catalog.TOOLS[tool].actions
    unknown = sorted(a for a in config.allowed_actions or () if a not in known)
    if unknown:
        raise _refuse(
            f"{tool} has no action {', '.join(unknown)}; GET /tools lists them",
            field="allowedActions",
            unknown=unknown,
        )
    if config.allowed_domains and tool not in DOMAIN_TOOLS:
        raise _refuse(f"{tool} reaches no domain of the org's choosing", field="allowedDomains")
    bad = sorted(d for d in config.allowed_domains if not re.fullmatch(DOMAIN_PATTERN, d))
    if bad:
        raise _refuse(
            "allowedDomains are lower-case host names, optionally `*.` and a domain",
            field="allowedDomains",
            unknown=bad,
        )
    return config
