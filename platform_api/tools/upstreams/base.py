"""What every upstream adapter shares: its actions (from humanwork_core.catalog), the
sanitiser, and one HTTP exchange with bounded retries (the errors are in `errors`, the
parameter checks in `params`).

An adapter never lets a credential out: results and error details go through
`sanitise`, error messages are built from the tool, action and status only, and the
log lines carry the method, path and status but never a header, query or body.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import logging
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import quote, urlsplit

import httpx

from humanwork_core import catalog
from platform_api.tools.upstreams.errors import (
    InvalidParams,
    MissingCredentials,
    UnknownAction,
    UpstreamError,
)

log = logging.getLogger(__name__)

REDACTED = "[redacted]"
DEFAULT_TIMEOUT = 10.0
DEFAULT_MAX_RETRIES = 2
DEFAULT_BACKOFF = 0.25
MAX_BACKOFF = 2.0
DEFAULT_MAX_PAGES = 20
USER_AGENT = "humanwork-platform-tool-proxy/0.1 (Language=Python)"
RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504})
UPSTREAM_MESSAGE_LIMIT = 300

# normalised (lower case, letters and digits only) fragments of key names that are dropped
SECRET_KEY_FRAGMENTS = (
    "accesstoken",
    "refreshtoken",
    "clientsecret",
    "authorization",
    "password",
    "apikey",
    "secret",
)


def _normalised_key(key: str) -> str:
    return re.sub(r"[^a-z0-9]", "", key.lower())


def is_secret_key(key: str) -> bool:
    """Whether a key name denotes a secret (`access_token`, `X-Shopify-Access-Token`,
    `clientSecret`, `Authorization`, ...); compared case- and punctuation-insensitively."""
    normalised = _normalised_key(key)
    return any(fragment in normalised for fragment in SECRET_KEY_FRAGMENTS)


def _needles(secrets: Iterable[str]) -> tuple[str, ...]:
    found: set[str] = set()
    for secret in secrets:
        if not isinstance(secret, str) or not secret:
            continue
        found.add(secret)
        found.add(quote(secret, safe=""))  # echoed inside a URL
    return tuple(found)


def _clean(value: Any, needles: tuple[str, ...]) -> Any:
    if isinstance(value, str):
        return REDACTED if any(n in value for n in needles) else value
    if isinstance(value, Mapping):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            if isinstance(key, str) and is_secret_key(key):
                continue
            out[_clean(key, needles)] = _clean(item, needles)
        return out
    if isinstance(value, list | tuple | set | frozenset):
        return [_clean(item, needles) for item in value]
    return value


def sanitise(value: Any, secrets: Iterable[str]) -> Any:
    """A deep copy of `value` safe to hand to an agent or write to the audit log.

    Every string (value or key) that contains one of `secrets` (as is or URL-encoded)
    becomes `"[redacted]"`; every mapping entry whose key names a secret
    (`access_token`, `refresh_token`, `client_secret`, `authorization`, `password`,
    `api_key`, `secret`, in any case and punctuation) is dropped. Lists, tuples and sets
    come back as lists; other scalars unchanged. Empty secrets are ignored.
    """
    return _clean(value, _needles(secrets))


# ---------------------------------------------------------------- one HTTP exchange

_ANSWERS: ContextVar[list[int] | None] = ContextVar("humanwork_upstream_answers", default=None)


@contextlib.contextmanager
def answers() -> Iterator[list[int]]:
    """Collect, in order, the HTTP status of every answer an upstream gives inside the
    block (an empty list: no request got an answer, nothing reached the upstream)."""
    seen: list[int] = []
    token = _ANSWERS.set(seen)
    try:
        yield seen
    finally:
        _ANSWERS.reset(token)


def note_answer(status: int) -> None:
    """Record an upstream's answer for the enclosing `answers` block (if any)."""
    seen = _ANSWERS.get()
    if seen is not None:
        seen.append(status)


@dataclass(frozen=True)
class HttpPolicy:
    """Timeouts and retries of the upstream calls."""

    timeout: float = DEFAULT_TIMEOUT
    max_retries: int = DEFAULT_MAX_RETRIES
    backoff: float = DEFAULT_BACKOFF


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _upstream_excerpt(response: httpx.Response, secrets: tuple[str, ...]) -> Any:
    """A short, sanitised view of an upstream error body (its JSON, or text)."""
    try:
        body: Any = response.json()
    except ValueError:
        body = response.text
    cleaned = sanitise(body, secrets)
    if isinstance(cleaned, str):
        return cleaned[:UPSTREAM_MESSAGE_LIMIT]
    text = repr(cleaned)
    return cleaned if len(text) <= UPSTREAM_MESSAGE_LIMIT * 4 else text[:UPSTREAM_MESSAGE_LIMIT]


OUTCOME_UNKNOWN = "unknown"
"""`details.outcome` of an error after which a write may or may not have taken effect."""
OUTCOME_NOT_SENT = "not_sent"
"""`details.outcome` of an error raised before the request left (nothing can have happened)."""
OUTCOME_REFUSED = "refused"
"""`details.outcome` of a write the upstream refused (a 4xx answer)."""
_NEVER_LEFT = (httpx.ConnectTimeout, httpx.PoolTimeout, httpx.ConnectError)
"""Transport errors raised before the request left: refused, unresolvable, connect timeout."""


@dataclass
class Exchange:
    """The context of one proxied call: which tool and action, the client, the secrets
    to keep out of errors, and the retry policy. `send` performs one upstream request.

    Outcomes of a request that may change the upstream (`unsafe`: not a GET, not marked
    `retry=True`) are classified in the error's `details.outcome`: `not_sent` when the
    connection was never made (refused, DNS failure, connect timeout); `unknown` when the
    request may have arrived (read or write timeout, connection broken after sending, a
    5xx answer). Such a request is never sent twice. `unsafe_sent` says whether one may
    have reached the upstream."""

    tool: str
    action: str
    client: httpx.AsyncClient
    secrets: tuple[str, ...]
    policy: HttpPolicy
    idempotency_key: str
    unsafe_sent: bool = False

    def error(
        self, response: httpx.Response, *, message: str | None = None, unsafe: bool = False
    ) -> UpstreamError:
        """The UpstreamError for an upstream error response. For a request that may
        change the upstream (`unsafe`), a 5xx leaves its outcome unknown: the details
        say so (`outcome: "unknown"`)."""
        status = response.status_code
        if message is None:
            message = f"{self.tool} answered {status} to {self.action}"
            if status in (401, 403):
                message += " (the integration's credentials were refused)"
        proxy_status = status if status in (404, 429) else 502
        details: dict[str, Any] = {
            "tool": self.tool,
            "action": self.action,
            "upstream_status": status,
            "upstream_error": _upstream_excerpt(response, self.secrets),
        }
        if unsafe:
            details["outcome"] = OUTCOME_UNKNOWN if status >= 500 else OUTCOME_REFUSED
        return UpstreamError(message, status=proxy_status, details=sanitise(details, self.secrets))

    async def send(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str],
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        data: Mapping[str, str] | None = None,
        retry: bool | None = None,
        raise_for_status: bool = True,
    ) -> httpx.Response:
        """One request; GETs (or `retry=True`) are retried up to `max_retries` times on
        429/5xx and transport errors, with exponential backoff (or the upstream's
        Retry-After, capped). Raises UpstreamError for an error status (unless
        `raise_for_status` is False), a timeout (504) or an unreachable upstream."""
        retryable = method.upper() == "GET" if retry is None else retry
        attempts = 1 + (self.policy.max_retries if retryable else 0)
        path = urlsplit(url).path
        for attempt in range(attempts):
            last = attempt == attempts - 1
            started = time.monotonic()
            try:
                response = await self.client.request(
                    method,
                    url,
                    headers={"User-Agent": USER_AGENT, **headers},
                    params=params,
                    json=json,
                    data=data,
                    timeout=self.timeout,
                )
            except httpx.TransportError as exc:
                self._failed(exc, retryable, f"{method} {path}", attempt)
                if not last:
                    await asyncio.sleep(self._delay(attempt, None))
                    continue
                raise self._transport_error(exc, retryable) from None
            self.unsafe_sent = self.unsafe_sent or not retryable
            note_answer(response.status_code)
            log.info(
                "%s %s %s %s -> %d in %.0f ms (attempt %d)",
                self.tool,
                self.action,
                method,
                path,
                response.status_code,
                (time.monotonic() - started) * 1000,
                attempt + 1,
            )
            if response.status_code in RETRYABLE_STATUSES and not last:
                await response.aclose()
                await asyncio.sleep(self._delay(attempt, _retry_after(response)))
                continue
            if response.status_code >= 400 and raise_for_status:
                raise self.error(response, unsafe=not retryable)
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    def _failed(
        self, exc: httpx.TransportError, retryable: bool, request: str, attempt: int
    ) -> None:
        """Note a request that got no answer: one that may have left makes the exchange
        `unsafe_sent` (unless it may be retried)."""
        if not isinstance(exc, _NEVER_LEFT):
            self.unsafe_sent = self.unsafe_sent or not retryable
        reason = "timed out" if isinstance(exc, httpx.TimeoutException) else type(exc).__name__
        log.warning(
            "%s %s %s: %s (attempt %d)", self.tool, self.action, request, reason, attempt + 1
        )

    def _transport_error(self, exc: httpx.TransportError, retryable: bool) -> UpstreamError:
        """The error of a request that got no answer on its last attempt: a timeout (504)
        or an unreachable upstream, with its outcome (`not_sent` when it never left,
        `unknown` for a write that may have)."""
        details: dict[str, Any] = {"tool": self.tool, "action": self.action}
        if isinstance(exc, httpx.TimeoutException):
            message = f"{self.tool} did not answer {self.action} within {self.timeout:g} s"
            status: int | None = 504
        else:
            details["reason"] = type(exc).__name__
            message = f"could not reach {self.tool} for {self.action}"
            status = None
        if isinstance(exc, _NEVER_LEFT):
            details["outcome"] = OUTCOME_NOT_SENT
        elif not retryable:
            if status is None:  # the request may have been sent before the connection broke
                message = f"the connection to {self.tool} broke during {self.action}"
            message += "; whether it took effect is unknown"
            details["outcome"] = OUTCOME_UNKNOWN
        return UpstreamError(message, status=status, details=details)

    @property
    def timeout(self) -> float:
        """The adapter's timeout, or the client's (the platform's
        `upstream_timeout_seconds`) when that is shorter."""
        configured = self.client.timeout.read
        if configured is None:
            return self.policy.timeout
        return min(self.policy.timeout, configured)

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, MAX_BACKOFF)
        return min(self.policy.backoff * (2.0**attempt), MAX_BACKOFF)

    def json_body(self, response: httpx.Response) -> dict[str, Any]:
        """The response's JSON object; UpstreamError when it is not one."""
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise UpstreamError(
                f"{self.tool} answered {self.action} with a body that is not a JSON object",
                details={
                    "tool": self.tool,
                    "action": self.action,
                    "upstream_status": response.status_code,
                },
            )
        return body


def after_write(exc: UpstreamError) -> str:
    """The outcome of an action that failed after one of its writes went out: `refused`
    when the upstream answered a 4xx (nothing more happened), else `unknown` (an answer
    without the expected body, a later request of the action failing)."""
    upstream_status = exc.details.get("upstream_status")
    if isinstance(upstream_status, int) and 400 <= upstream_status < 500:
        return OUTCOME_REFUSED
    return OUTCOME_UNKNOWN


# ---------------------------------------------------------------- the adapter base


class Adapter(ABC):
    """One upstream tool behind the proxy.

    Subclasses set `tool` (a tool of the action catalog, whose actions the adapter
    serves) and `integration_type`, list the credential fields
    that are not secret in `public_credential_fields`, and implement `perform`.
    `call` checks the action and parameters, works out the secrets, performs the action
    and hands back a sanitised result.
    """

    tool: ClassVar[str]
    integration_type: ClassVar[str]
    needs_credentials: ClassVar[bool] = True
    """False for a tool without an integration (`web`): the proxy hands it the org's tool
    config and the platform's limits instead of decrypted credentials."""
    # credential fields whose values are not secret (hosts, ids, versions); every other
    # field's value is kept out of results, errors and logs
    public_credential_fields: ClassVar[frozenset[str]] = frozenset()
    # credential fields that are always secret, however short their values
    secret_credential_fields: ClassVar[frozenset[str]] = frozenset()

    def __init__(
        self,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        backoff: float = DEFAULT_BACKOFF,
        max_pages: int = DEFAULT_MAX_PAGES,
    ) -> None:
        if max_retries < 0 or timeout <= 0 or backoff < 0 or max_pages < 1:
            raise ValueError("timeout and max_pages must be positive, retries and backoff >= 0")
        self.policy = HttpPolicy(timeout=timeout, max_retries=max_retries, backoff=backoff)
        self.max_pages = max_pages

    @property
    def actions(self) -> Mapping[str, catalog.Action]:
        """The tool's actions, from the action catalog."""
        return catalog.TOOLS[self.tool].actions

    def spec(self, action: str) -> catalog.Action:
        """The spec of `action`; UnknownAction (listing the known ones) otherwise."""
        spec = self.actions.get(action) if isinstance(action, str) else None
        if spec is None:
            raise UnknownAction(
                f"{self.tool} has no action {str(action)[:100]!r}",
                details={"tool": self.tool, "known_actions": sorted(self.actions)},
            )
        return spec

    def check_params(self, spec: catalog.Action, params: Any) -> dict[str, Any]:
        """The parameters as a dict; InvalidParams when one is missing or unknown."""
        if params is None:
            params = {}
        if not isinstance(params, Mapping):
            raise InvalidParams("params must be an object", details={"action": spec.name})
        missing = [p for p in spec.required if params.get(p) is None]
        if missing:
            raise InvalidParams(
                f"{spec.name} needs {', '.join(missing)}",
                details={"action": spec.name, "missing": missing},
            )
        allowed = set(spec.param_names)
        unknown = sorted(str(p)[:100] for p in params if p not in allowed)
        if unknown:
            raise InvalidParams(
                f"{spec.name} does not take {', '.join(unknown)}",
                details={"action": spec.name, "unknown": unknown, "allowed": sorted(allowed)},
            )
        return dict(params)

    def secrets_of(self, credentials: Mapping[str, Any]) -> tuple[str, ...]:
        """The credential values to keep out of anything the adapter returns: every
        field not known to be public (the known secret ones at any length, unknown ones
        from 8 characters, so that a short flag cannot redact half a result)."""
        found: list[str] = []
        for key, value in credentials.items():
            if not isinstance(value, str) or not value or key in self.public_credential_fields:
                continue
            if key in self.secret_credential_fields or is_secret_key(key) or len(value) >= 8:
                found.append(value)
        return tuple(found)

    async def call(
        self,
        action: str,
        params: dict[str, Any],
        credentials: dict[str, Any],
        *,
        client: httpx.AsyncClient,
        idempotency_key: str,
    ) -> dict[str, Any]:
        """Perform `action` with `params` on the upstream, authenticated with the org's
        decrypted `credentials`, through `client`. Returns the sanitised result.

        Raises UnknownAction, InvalidParams, MissingCredentials before any request, and
        UpstreamError when the upstream fails or answers an error. `idempotency_key` is
        sent as the `Idempotency-Key` header of side-effecting requests (the upstreams
        ignore it; the proxy is what makes a retried step run once)."""
        spec = self.spec(action)
        checked = self.check_params(spec, params)
        if not isinstance(credentials, Mapping):
            raise MissingCredentials(
                f"the {self.tool} integration is not configured", details={"tool": self.tool}
            )
        secrets = self.secrets_of(credentials)
        exchange = Exchange(
            tool=self.tool,
            action=spec.name,
            client=client,
            secrets=secrets,
            policy=self.policy,
            idempotency_key=idempotency_key,
        )
        try:
            result = await self.perform(spec, checked, credentials, exchange)
        except UpstreamError as exc:
            if exchange.unsafe_sent and exc.details.get("outcome") is None:
                exc.details["outcome"] = after_write(exc)
            exc.message = sanitise(exc.message, exchange.secrets)
            exc.details = sanitise(exc.details, exchange.secrets)
            exc.args = (exc.message,)
            raise
        cleaned = sanitise(result, exchange.secrets)
        assert isinstance(cleaned, dict)
        return cleaned

    @abstractmethod
    async def perform(
        self,
        spec: catalog.Action,
        params: dict[str, Any],
        credentials: Mapping[str, Any],
        exchange: Exchange,
    ) -> dict[str, Any]:
        """Carry out one checked action; the result is sanitised by `call`."""
