"""`/workspace`: the pages of the expert workspace and their static assets; `router` also
carries the client portal's pages (`/portal`, `portal.py`).

Every page is the same layout (`templates/base.html`, `pages.WORKSPACE`) around one page
template; the values put into a template are HTML-escaped. The pages hold no user data:
`app.js` reads it from the JSON API (`/users/me`, `/human-tasks`, ...) with the bearer
token the login page obtained from `POST /auth/token`. None of these routes is part of the
OpenAPI document.
"""

from __future__ import annotations

import re
import uuid
from typing import Annotated

from fastapi import APIRouter, Path, Request
from fastapi.responses import RedirectResponse, Response

from platform_api.errors import NotFound
from platform_api.web.pages import STATIC_TYPES, asset, render
from platform_api.web.portal import portal

workspace_router = APIRouter(prefix="/workspace", include_in_schema=False)

NAMESPACE = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
NAME = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
STEP = r"^[^/]{1,63}$"


@workspace_router.get("")
@workspace_router.get("/")
async def workspace() -> RedirectResponse:
    return RedirectResponse("/workspace/tasks", status_code=303)


@workspace_router.get("/login")
async def login_page() -> Response:
    return render(
        "login",
        "Log in · humanwork",
        action="Log in",
        intro="Review and decide what your organisations' agents may do.",
    )


@workspace_router.get("/tasks")
async def queue_page() -> Response:
    return render("tasks", "To Review · humanwork")


@workspace_router.get("/access")
async def access_page() -> Response:
    return render("access", "Access map · humanwork")


@workspace_router.get("/tasks/{namespace}/{name}/{step_id}")
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


# a draft reply waiting in the queue, with its thread
@workspace_router.get("/replies/{reply_id}")
async def reply_page(reply_id: uuid.UUID) -> Response:
    return render("reply", "Draft reply · humanwork", reply=str(reply_id))


# the org's agents and their health
@workspace_router.get("/agents")
async def agents_page() -> Response:
    return render("agents", "Agents · humanwork")


_FILENAME = re.compile(r"^[a-z]+\.[a-z]+$")


@workspace_router.get("/static/{filename}")
async def static(filename: str, request: Request) -> Response:
    if not _FILENAME.match(filename) or filename not in STATIC_TYPES:
        raise NotFound("no such file")
    found = asset(filename)
    headers = {
        "ETag": found.etag,
        "Cache-Control": "no-cache",
        "X-Content-Type-Options": "nosniff",
    }
    if request.headers.get("if-none-match") == found.etag:
        return Response(status_code=304, headers=headers)
    return Response(found.body, media_type=found.media_type, headers=headers)


router = APIRouter(include_in_schema=False)
router.include_router(workspace_router)
router.include_router(portal)
