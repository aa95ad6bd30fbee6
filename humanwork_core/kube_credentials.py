"""Where the API server is and how a component (the operator, the platform API, its
backup tool) authenticates to it, read without a client library: in a pod, its
ServiceAccount (the API server from `KUBERNETES_SERVICE_HOST`/`_PORT`, the cluster CA and
the projected token, re-read as the kubelet rotates it); elsewhere the current context of
a kubeconfig (`KUBECONFIG` or ~/.kube/config) with a bearer token or a client certificate,
its server verified against its CA (or the system's), never skipped unless the kubeconfig
says `insecure-skip-tls-verify`.

The official clients (`kubernetes`, `kubernetes_asyncio`) are imported by no component:
they load hundreds of generated model modules (about 40 MiB of resident memory) for the
few calls each makes; kopf logs in the same way (its own kubeconfig and ServiceAccount
login). No I/O but reading the files named; no aiohttp (the agent's image ships this
module too).
"""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
TOKEN_REREAD_SECONDS = 60.0
"""How often a token read from a file is read again (the kubelet rotates projected tokens
well before they expire)."""


class CredentialsError(Exception):
    """No usable in-cluster identity nor kubeconfig."""


@dataclass
class Credentials:
    """The API server's URL, the TLS context to reach it, and the bearer token (if any)."""

    server: str
    ssl_context: ssl.SSLContext | bool
    token: str | None = None
    token_file: Path | None = None
    _read_at: float = field(default=0.0, repr=False)

    def authorization(self) -> str | None:
        """The Authorization header's value, the token file re-read once a minute."""
        if self.token_file is not None and time.monotonic() - self._read_at > TOKEN_REREAD_SECONDS:
            self.token = self.token_file.read_text().strip()
            self._read_at = time.monotonic()
        return f"Bearer {self.token}" if self.token else None


def load(kubeconfig: str | None = None, environ: Mapping[str, str] | None = None) -> Credentials:
    """In-cluster credentials when running in a pod (and no kubeconfig is given), else the
    kubeconfig's current context."""
    env = os.environ if environ is None else environ
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
    if kubeconfig is None and host and port and (SERVICE_ACCOUNT_DIR / "token").exists():
        return in_cluster(env)
    paths = kubeconfig or env.get("KUBECONFIG") or str(Path("~/.kube/config").expanduser())
    return from_kubeconfig(Path(paths.split(os.pathsep)[0]))


def in_cluster(environ: Mapping[str, str] | None = None) -> Credentials:
    """The pod's ServiceAccount: the API server from `KUBERNETES_SERVICE_HOST`/`_PORT`, the
    cluster CA and the projected token (re-read as the kubelet rotates it)."""
    env = os.environ if environ is None else environ
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
    token_file = SERVICE_ACCOUNT_DIR / "token"
    if not (host and port and token_file.exists()):
        raise CredentialsError("not in a pod: no KUBERNETES_SERVICE_HOST/_PORT or no token")
    context = ssl.create_default_context(cafile=str(SERVICE_ACCOUNT_DIR / "ca.crt"))
    server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    return Credentials(server, context, token_file=token_file)


def from_kubeconfig(path: Path) -> Credentials:
    """The current context of the kubeconfig at `path`."""
    try:
        doc: dict[str, Any] = yaml.safe_load(path.read_text()) or {}
    except OSError as exc:
        raise CredentialsError(f"no kubeconfig at {path}: {exc}") from exc
    current = doc.get("current-context")
    context = _named(doc, "contexts", current, "context")
    cluster = _named(doc, "clusters", context.get("cluster"), "cluster")
    user = _named(doc, "users", context.get("user"), "user")
    server = str(cluster.get("server") or "")
    if not server:
        raise CredentialsError(f"{path}: the cluster of context {current!r} names no server")
    return Credentials(server, _ssl_context(cluster, user, path.parent), user.get("token"))


def _named(doc: Mapping[str, Any], section: str, name: Any, key: str) -> dict[str, Any]:
    for item in doc.get(section) or []:
        if item.get("name") == name:
            return dict(item.get(key) or {})
    raise CredentialsError(f"the kubeconfig has no {section[:-1]} named {name!r}")


def _ssl_context(
    cluster: Mapping[str, Any], user: Mapping[str, Any], base: Path
) -> ssl.SSLContext | bool:
    if cluster.get("insecure-skip-tls-verify"):
        return False
    # the cluster's CA alone when the kubeconfig names one (as client-go), else the system's
    ca = _pem(cluster, "certificate-authority", base)
    context = ssl.create_default_context(cadata=ca.decode() if ca else None)
    cert = _pem(user, "client-certificate", base)
    key = _pem(user, "client-key", base)
    if cert and key:
        # the ssl module loads a certificate chain from files only: a private temporary
        # folder, removed at once
        with tempfile.TemporaryDirectory(prefix="humanwork-kube-") as tmp:
            cert_file, key_file = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
            cert_file.write_bytes(cert)
            key_file.write_bytes(key)
            context.load_cert_chain(str(cert_file), str(key_file))
    return context


def _pem(entry: Mapping[str, Any], name: str, base: Path) -> bytes | None:
    """A PEM block given inline (`<name>-data`, base64) or as a file (`<name>`, relative
    to the kubeconfig's folder)."""
    if entry.get(f"{name}-data"):
        return base64.b64decode(entry[f"{name}-data"])
    if entry.get(name):
        return (base / str(entry[name])).read_bytes()
    return None
