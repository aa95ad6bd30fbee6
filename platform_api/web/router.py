"""`/workspace`: the pages of the expert workspace and their static assets.

Every page is the same layout (`templates/base.html`) around one page template; the
values put into a template are HTML-escaped. The pages hold no user data: `app.js` reads
it from the JSON API (`/users/me`, `/human-tasks`, ...) with the bearer token the login
page obtained from `POST /auth/token`. None of these routes is part of the OpenAPI
document.
"""

from __future__ import annotations

import hashlib
import html
import re
import uuid
from dataclasses import dataclass
from functools import cache
from importlib import resources
from string import Template
from typing import Annotated

from fastapi import APIRouter, Path, Request
from fastapi.responses import RedirectResponse, Response

from platform_api.errors import NotFound

router = APIRouter(prefix="/workspace", include_in_schema=False)

NAMESPACE = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
NAME = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
STEP = r"^[^/]{1,63}$"

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
def _asset(name: str) -> Asset:
    body = _read("static", name)
    return Asset(body, STATIC_TYPES[name], f'"{hashlib.sha256(body).hexdigest()[:32]}"')


def _version() -> str:
    """A token that changes with the assets, so that browsers fetch new ones."""
    digest = hashlib.sha256()
    for name in sorted(STATIC_TYPES):
        digest.update(_asset(name).etag.encode())
    return digest.hexdigest()[:12]


def render(page: str, title: str, **values: str) -> Response:
    """The layout around `templates/<page>.html`; every value is HTML-escaped."""
    escaped = {key: html.escape(value, quote=True) for key, value in values.items()}
    body = _template(f"{page}.html").substitute(escaped)
    document = _template("base.html").substitute(
        title=html.escape(title),
        page=page,
        version=_version(),
        body=body,
    )
    return Response(document, media_type="text/html; charset=utf-8", headers=PAGE_HEADERS)


@router.get("")
@router.get("/")
async def workspace() -> RedirectResponse:
    return RedirectResponse("/workspace/tasks", status_code=303)


@router.get("/login")
async def login_page() -> Response:
    return render("login", "Log in · humanwork")


@router.get("/tasks")
async def queue_page() -> Response:
    return render("tasks", "To Review · humanwork")


@router.get("/access")  # issue 15 item 7
async def access_page() -> Response:
    return render("access", "Access map · humanwork")


@router.get("/tasks/{namespace}/{name}/{step_id}")
async def detail_page(
    namespace: Annotated[str, Path(max_length=63, pattern=NAMESPACE)],
    name: Annotated[str, Path(max_length=253, pattern=NAME)],
    step_id: Annotated[str, Path(max_length=63, pattern=STEP)],
) -> Response:
    return render(
        "task",
        f"{name} / {step_id} · humanwork",
        namespace=namespace,
        name=name,
        step=step_id,
    )


# issue 14: a draft reply waiting in the queue, with its thread
@router.get("/replies/{reply_id}")
async def reply_page(reply_id: uuid.UUID) -> Response:
    return render("reply", "Draft reply · humanwork", reply=str(reply_id))


# issue 15 (onboard): the org's agents and their health
@router.get("/agents")
async def agents_page() -> Response:
    return render("agents", "Agents · humanwork")


_FILENAME = re.compile(r"^[a-z]+\.[a-z]+$")


@router.get("/static/{filename}")
async def static(filename: str, request: Request) -> Response:
    if not _FILENAME.match(filename) or filename not in STATIC_TYPES:
        raise NotFound("no such file")
    asset = _asset(filename)
    headers = {
        "ETag": asset.etag,
        "Cache-Control": "no-cache",
        "X-Content-Type-Options": "nosniff",
    }
    if request.headers.get("if-none-match") == asset.etag:
        return Response(status_code=304, headers=headers)
    return Response(asset.body, media_type=asset.media_type, headers=headers)
