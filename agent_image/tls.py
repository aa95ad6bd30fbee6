"""The agent's trust in the platform: an HTTP transport that verifies the platform's
certificate against the CA bundle the operator mounts (`HUMANWORK_PLATFORM_CA_FILE`, a
ConfigMap volume) and follows that file when it changes, without a restart.

Before each request the file's stamp is looked at (one `stat`); when it changed and its
content too, a new `SSLContext` trusting exactly the new bundle (not the system's CAs)
makes a new connection pool, which every later request uses; the old pool's connections
finish what they carry and are closed with the client. A bundle that cannot be read or
parsed keeps the previous one in use (logged); with none loaded yet, the request fails as
a connection error, which the platform client retries.
"""

from __future__ import annotations

import hashlib
import logging
import ssl
from pathlib import Path
from typing import Any

import httpx

LOG = logging.getLogger("humanwork.agent.tls")


def client_context(bundle: str) -> ssl.SSLContext:
    """A client context that trusts only `bundle` (PEM) and checks the host name."""
    context = ssl.create_default_context(cadata=bundle)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


class ReloadingCATransport(httpx.AsyncBaseTransport):
    """An `httpx` transport that trusts the CA bundle in `ca_file` as it is now."""

    def __init__(self, ca_file: Path, **options: Any) -> None:
        self.ca_file = ca_file
        self.options = options
        self.loads = 0
        self._stamp: tuple[int, int, int] | None = None
        self._digest = ""
        self._current: httpx.AsyncHTTPTransport | None = None
        self._retired: list[httpx.AsyncHTTPTransport] = []

    def _read(self) -> httpx.AsyncHTTPTransport | None:
        found = self.ca_file.stat()
        stamp = (found.st_ino, found.st_mtime_ns, found.st_size)
        if stamp == self._stamp:
            return self._current
        data = self.ca_file.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if self._current is None or digest != self._digest:
            fresh = httpx.AsyncHTTPTransport(verify=client_context(data.decode()), **self.options)
            if self._current is not None:
                self._retired.append(self._current)
            self._current, self._digest = fresh, digest
            self.loads += 1
            LOG.info("platform CA loaded from %s (sha256 %s)", self.ca_file, digest[:12])
        self._stamp = stamp
        return self._current

    def transport(self) -> httpx.AsyncHTTPTransport:
        """The pool for the bundle as the file holds it now (or the last one that loaded)."""
        try:
            current = self._read()
        except (OSError, ValueError, ssl.SSLError) as exc:
            LOG.warning("platform CA %s not loaded: %s", self.ca_file, exc)
            current = self._current
        if current is None:
            raise httpx.ConnectError(f"no platform CA could be loaded from {self.ca_file}")
        return current

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self.transport().handle_async_request(request)

    async def aclose(self) -> None:
        for pool in [*self._retired, *([self._current] if self._current else [])]:
            await pool.aclose()
        self._retired, self._current = [], None


def platform_client(ca_file: Path | None, timeout: float = 30.0) -> httpx.AsyncClient:
    """The agent's HTTP client to the platform: verified against `ca_file` when set."""
    if ca_file is None:
        return httpx.AsyncClient(timeout=timeout)
    return httpx.AsyncClient(timeout=timeout, transport=ReloadingCATransport(ca_file))
