"""What every page of the web UI shares: the layouts around the page templates, the strict
security headers, and the static assets with their validators. The expert workspace
(`router.py`) and the client portal (`portal.py`) both render through `render`."""

from __future__ import annotations

import hashlib
import html
from dataclasses import dataclass
from functools import cache
from importlib import resources
from string import Template

from fastapi.responses import Response

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
    ]
)
PAGE_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
STATIC_TYPES = {
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
    "portal.js": "text/javascript; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}


@dataclass(frozen=True)
class Asset:
    """A static file with its validator."""

    body: bytes
    media_type: str
    etag: str


def _read(folder: str, name: str) -> bytes:
    return resources.files("platform_api.web").joinpath(folder, name).read_bytes()


@cache
def _template(name: str) -> Template:
    return Template(_read("templates", name).decode())


@cache
def asset(name: str) -> Asset:
    body = _read("static", name)
    return Asset(body, STATIC_TYPES[name], f'"{hashlib.sha256(body).hexdigest()[:32]}"')


def _version() -> str:
    """A token that changes with the assets, so that browsers fetch new ones."""
    digest = hashlib.sha256()
    for name in sorted(STATIC_TYPES):
        digest.update(asset(name).etag.encode())
    return digest.hexdigest()[:12]


def render(page: str, title: str, layout: str = "base", **values: str) -> Response:
    """The layout `templates/<layout>.html` around `templates/<page>.html`; every value is
    HTML-escaped."""
    escaped = {key: html.escape(value, quote=True) for key, value in values.items()}
    body = _template(f"{page}.html").substitute(escaped)
    document = _template(f"{layout}.html").substitute(
        title=html.escape(title),
        page=page,
        version=_version(),
        body=body,
    )
    return Response(document, media_type="text/html; charset=utf-8", headers=PAGE_HEADERS)
