"""What every page of the web UI shares: the one layout around the page templates
(`templates/base.html`, filled per area with its header, its dialog and its script), the
strict security headers, and the static assets with their validators. The expert workspace
(`router.py`) and the client portal (`portal.py`) both render through `render`, and both
pages load `common.js` (the helpers, session and API call they share) before their own."""

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
    "common.js": "text/javascript; charset=utf-8",
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


@dataclass(frozen=True)
class Layout:
    """One area's parts of `templates/base.html`: its script, its header (a template), the
    class of its body and its confirming dialog (`templates/dialog.html` with `dialog`)."""

    script: str
    header: str
    body_class: str
    dialog: dict[str, str]


WORKSPACE = Layout(
    script="app.js",
    header="workspace_header",
    body_class="",
    dialog={
        "name": "reject",
        "title": "Reject",
        "field": "feedback",
        "label": "Feedback for the agent (required)",
        "hint": "A rejection halts the task; the agent receives this feedback to revise its plan.",
        "confirm_id": "reject-confirm",
        "confirm": "Reject",
    },
)
PORTAL = Layout(
    script="portal.js",
    header="portal_header",
    body_class="portal",
    dialog={
        "name": "decline",
        "title": "Decline this step",
        "field": "reason",
        "label": "Your reason (required)",
        "hint": "Declining stops the task; the expert and the agent see your reason.",
        "confirm_id": "decline-submit",
        "confirm": "Decline",
    },
)


def render(page: str, title: str, layout: Layout = WORKSPACE, **values: str) -> Response:
    """`templates/base.html` with `layout`'s parts around `templates/<page>.html`; every
    value is HTML-escaped."""
    escaped = {key: html.escape(value, quote=True) for key, value in values.items()}
    body = _template(f"{page}.html").substitute(escaped)
    dialog = {key: html.escape(value, quote=True) for key, value in layout.dialog.items()}
    document = _template("base.html").substitute(
        title=html.escape(title),
        page=page,
        version=_version(),
        script=layout.script,
        body_class=f' class="{layout.body_class}"' if layout.body_class else "",
        header=_template(f"{layout.header}.html").template,
        body=body,
        dialog=_template("dialog.html").substitute(dialog),
    )
    return Response(document, media_type="text/html; charset=utf-8", headers=PAGE_HEADERS)
