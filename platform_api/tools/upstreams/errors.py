"""The upstream adapters' errors: members of the platform's one error family
(`platform_api.errors.PlatformError`), each with its code and HTTP status.

An adapter's `details` are internal (the upstream's own status, a sanitised excerpt of its
answer, the outcome of a write) and never carry a credential; `public_details` is what the
API answers with. `status` is the status the upstream's answer suggests (its 404 or 429, 504
for a timeout, else 502); the proxy answers `status_code`, and says `status` in
`details.upstreamStatus`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from platform_api.errors import PlatformError


class UpstreamError(PlatformError):
    """The upstream (Shopify, Amazon, ...) failed or refused the call; never carries a
    credential. Answered with 502 and the upstream's status in `details.upstreamStatus`."""

    code = "upstream_error"
    status_code = 502

    def __init__(
        self, message: str, *, status: int | None = None, details: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.status: int = self.status_code if status is None else status
        self.details: dict[str, Any] = dict(details or {})

    def public_details(self) -> dict[str, Any]:
        """The upstream's status, the outcome of a write (`outcome`, `partlyApplied`) and
        the status the upstream answered, as strings; nothing of its body."""
        out: dict[str, Any] = {"upstreamStatus": str(self.status)}
        outcome = self.details.get("outcome")
        if isinstance(outcome, str):
            out["outcome"] = outcome
        if self.details.get("applied"):
            out["partlyApplied"] = "true"
        upstream_status = self.details.get("upstream_status")
        if isinstance(upstream_status, int):
            out["upstreamAnswered"] = str(upstream_status)
        return out


class UnknownTool(UpstreamError):
    """The tool proxy has no adapter for this tool (or the org has no such tool)."""

    code = "unknown_tool"
    status_code = 404

    def public_details(self) -> dict[str, Any]:
        return {k: v for k, v in self.details.items() if k == "tool"}


class UnknownAction(UpstreamError):
    """The tool has no action of this name."""

    code = "unknown_action"
    status_code = 422

    def public_details(self) -> dict[str, Any]:
        return {k: v for k, v in self.details.items() if k == "tool"}


class InvalidParams(UpstreamError):
    """A required parameter is missing, an unknown one was given, or a value is unusable."""

    code = "invalid_params"
    status_code = 422

    def public_details(self) -> dict[str, Any]:
        return {}


class MissingCredentials(UpstreamError):
    """The org has stored no credentials for the tool's integration, or they lack a field
    the adapter needs. Nothing was sent: a retry may call again."""

    code = "integration_missing"
    status_code = 409

    def public_details(self) -> dict[str, Any]:
        return {k: v for k, v in self.details.items() if k == "integration"}


class EgressRefused(UpstreamError):
    """An integration endpoint the platform will not connect to; `details.field` names it
    and `details.reason` says why (invalid_url, scheme_not_allowed, userinfo, fragment,
    host_not_allowed, address_forbidden). Answered 422 when credentials are stored, 409
    when a stored endpoint is refused at call time (the org's admin must store it again)."""

    code = "integration_endpoint_refused"
    status_code = 409

    def __init__(self, tool: str, field: str, reason: str, message: str) -> None:
        # nothing is sent to a refused endpoint; the claim is kept as refused all the same
        super().__init__(message, details={"tool": tool, "field": field, "reason": reason})
        self.reason = reason
        self.field = field

    def public_details(self) -> dict[str, Any]:
        return {"field": self.field, "reason": self.reason}
