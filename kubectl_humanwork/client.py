"""The plugin's view of the platform API: where it is, the caller's token, and one call.

The URL and token come from `HUMANWORK_URL` and `HUMANWORK_TOKEN`, else from the config
file (`HUMANWORK_CONFIG`, else `$XDG_CONFIG_HOME/humanwork/config.json`, else
`~/.config/humanwork/config.json`): `{"url": ..., "token": ...}`, written by `login`.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

TIMEOUT_SECONDS = 30.0


class PluginError(Exception):
    """Anything the plugin reports and exits on; `exit_code` is the process's status."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ConfigError(PluginError):
    """No platform URL or token."""

    exit_code = 2


class Unreachable(PluginError):
    """The platform API could not be reached."""

    exit_code = 4


class BadAnswer(PluginError):
    """The platform answered, but not with what its API promises (not JSON, or JSON of
    another shape): a proxy in the way, another service at the URL, another version."""

    exit_code = 6


class ApiError(PluginError):
    """The platform answered an error: its stable `code`, message and HTTP status."""

    exit_code = 1

    def __init__(self, status: int, code: str, message: str, details: Mapping[str, Any]) -> None:
        super().__init__(f"{code} (HTTP {status}): {message}")
        self.status = status
        self.code = code
        self.details = dict(details)


def config_path(env: Mapping[str, str]) -> Path:
    if env.get("HUMANWORK_CONFIG"):
        return Path(env["HUMANWORK_CONFIG"])
    base = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else None
    if base is None:
        base = Path(env.get("HOME") or Path.home()) / ".config"
    return base / "humanwork" / "config.json"


def read_config(env: Mapping[str, str]) -> dict[str, Any]:
    path = config_path(env)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a JSON object with url and token")
    return data


def write_config(env: Mapping[str, str], values: Mapping[str, Any]) -> Path:
    """Write the config file, readable by its owner only."""
    path = config_path(env)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        json.dump(dict(values), handle, indent=2)
        handle.write("\n")
    path.chmod(0o600)
    return path


def _printable_ascii(text: str) -> bool:
    return text.isascii() and text.isprintable() and " " not in text


def new_key() -> str:
    """A fresh Idempotency-Key."""
    return f"kubectl-{uuid.uuid4().hex}"


@dataclass
class Client:
    """Calls the platform API at `url` with the bearer `token`."""

    url: str
    token: str | None
    transport: httpx.BaseTransport | None = None

    @classmethod
    def from_env(
        cls, env: Mapping[str, str], url: str | None = None, need_token: bool = True
    ) -> Client:
        config = read_config(env)
        base = url or env.get("HUMANWORK_URL") or config.get("url")
        token = env.get("HUMANWORK_TOKEN") or config.get("token")
        if not base:
            raise ConfigError(
                "no platform API: set HUMANWORK_URL (or --url), or run `kubectl humanwork login`"
            )
        if need_token and not token:
            raise ConfigError("no token: set HUMANWORK_TOKEN, or run `kubectl humanwork login`")
        if token is not None and not _printable_ascii(str(token)):
            raise ConfigError("the token holds characters a bearer token cannot have")
        return cls(str(base).rstrip("/"), None if token is None else str(token))

    def call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, Any] | None = None,
        key: str | None = None,
    ) -> Any:
        headers = {"Accept": "application/json", "User-Agent": "kubectl-humanwork"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if key is not None:
            headers["Idempotency-Key"] = key
        try:
            with httpx.Client(
                base_url=self.url, timeout=TIMEOUT_SECONDS, transport=self.transport
            ) as http:
                response = http.request(
                    method,
                    path,
                    json=body,
                    params={k: v for k, v in (params or {}).items() if v is not None},
                    headers=headers,
                )
        except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
            raise ConfigError(f"{self.url!r} is not a usable platform URL: {exc}") from None
        except httpx.HTTPError as exc:
            raise Unreachable(f"cannot reach the platform API at {self.url}: {exc}") from None
        data = self._data(response, method, path)
        if response.is_error:
            if isinstance(data, dict) and "code" in data:
                raise ApiError(
                    response.status_code,
                    str(data["code"]),
                    str(data.get("message", "")),
                    data.get("details") or {},
                )
            raise ApiError(response.status_code, "http_error", response.reason_phrase, {})
        return data

    def _data(self, response: httpx.Response, method: str, path: str) -> Any:
        """The answer's JSON (None for 204, or for an error answer without JSON)."""
        if response.status_code == 204:
            return None
        try:
            return response.json()
        except ValueError:
            if response.is_error:
                return None
            raise BadAnswer(
                f"the platform API at {self.url} answered {method} {path} "
                f"(HTTP {response.status_code}) with something that is not JSON"
            ) from None
