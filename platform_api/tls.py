"""The platform's serving certificate: TLS for `humanwork-platform serve`, reloaded without
a restart when the mounted certificate and key change.

The listening socket keeps one `ssl.SSLContext`; its SNI callback, called on every
handshake (with a server name or without one), checks the files' stamps (at most once a
second) and, when they changed, loads the new pair into a fresh context that this and
every later handshake then uses. Connections already open keep the certificate they were
made with. A pair that does not load (a key that does not match its certificate while the
files are half written) is logged and the previous pair stays in use.
"""

from __future__ import annotations

import logging
import ssl
import threading
import time
from pathlib import Path
from typing import Any

import uvicorn

LOG = logging.getLogger("humanwork.platform.tls")

CHECK_SECONDS = 1.0
"""How often, at most, a handshake looks at the files' stamps."""


def _stamp(path: Path) -> tuple[int, int, int]:
    found = path.stat()  # follows the kubelet's ..data symlink to the current file
    return (found.st_ino, found.st_mtime_ns, found.st_size)


def _context(cert: Path, key: Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert, key)
    return context


class ServingCertificate:
    """A server `SSLContext` for `cert` and `key` that follows their files."""

    def __init__(self, cert: Path, key: Path, check_seconds: float = CHECK_SECONDS) -> None:
        self.cert, self.key, self.check_seconds = cert, key, check_seconds
        self._stamps = (_stamp(cert), _stamp(key))
        self.listening = _context(cert, key)
        self.listening.sni_callback = self._on_hello
        self.current = self.listening
        self.loads = 1
        self._checked = time.monotonic()
        self._lock = threading.Lock()

    def refresh(self) -> bool:
        """Load the pair again when a file changed; whether a new pair is now served."""
        try:
            stamps = (_stamp(self.cert), _stamp(self.key))
        except OSError as exc:
            LOG.warning("serving certificate unreadable, the previous one stays: %s", exc)
            return False
        if stamps == self._stamps:
            return False
        try:
            fresh = _context(self.cert, self.key)
        except (OSError, ssl.SSLError) as exc:
            LOG.warning("new serving certificate not loaded, the previous one stays: %s", exc)
            return False
        self._stamps, self.current = stamps, fresh
        self.loads += 1
        LOG.info("serving certificate reloaded from %s", self.cert)
        return True

    def _on_hello(self, connection: Any, server_name: str | None, context: ssl.SSLContext) -> None:
        with self._lock:
            now = time.monotonic()
            if now - self._checked >= self.check_seconds:
                self._checked = now
                self.refresh()
            current = self.current
        if current is not context:
            connection.context = current


class ReloadingConfig(uvicorn.Config):
    """uvicorn's configuration whose TLS context is a :class:`ServingCertificate`'s."""

    served: ServingCertificate | None = None

    def load(self) -> None:
        super().load()
        if self.is_ssl and self.ssl_certfile and self.ssl_keyfile:
            self.served = ServingCertificate(Path(self.ssl_certfile), Path(str(self.ssl_keyfile)))
            self.ssl = self.served.listening
